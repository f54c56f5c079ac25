#include "bench/common_flags.h"

namespace ds::bench::flags {

CLI::Option* json(CLI::App* app, std::string& path, const std::string& help) {
  return app->add_option("-J,--json", path, help)->envname("DSBENCH_JSON");
}

CLI::Option* initMethod(CLI::App* app, std::string& url) {
  return app->add_option("--init-method", url, "env:// (default), tcp://HOST:PORT or file:///PATH")
      ->envname("DSBENCH_INIT_METHOD");
}

CLI::Option* label(CLI::App* app, std::string& label, bool& given) {
  return app
      ->add_option_function<std::string>(
          "--label",
          [&label, &given](const std::string& v) {
            label = v;
            given = true;
          },
          "name of the cluster or system this run describes (kept as metadata.label in the JSON, so one "
          "history serves many); 1-64 printable characters")
      ->envname("DSBENCH_LABEL");
}

CLI::Option* repeat(CLI::App* app, int& passes, const std::string& what) {
  return app
      ->add_option("--repeat", passes,
                   "passes over the " + what +
                       ", the order rotated each pass; every pass is kept in the JSON and dsreport compare "
                       "tests them (5 lets it tell a 5% change from noise)")
      ->capture_default_str()
      ->envname("DSBENCH_REPEAT");
}

CLI::Option* quiet(CLI::App* app, bool& verbose) {
  return app->add_flag("!--quiet", verbose, "do not log what init_distributed discovered");
}

}  // namespace ds::bench::flags
