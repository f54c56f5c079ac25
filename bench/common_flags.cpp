#include "bench/common_flags.h"

#include "engine/common/backends.h"
#include "engine/init.h"
#include "reports/schema/label.h"

namespace ds::bench::flags {

CLI::Option* json(CLI::App* app, std::string& path, const std::string& help) {
  return app->add_option("-J,--json", path, help)->check(cli::outputFile())->envname("DSBENCH_JSON");
}

CLI::Validator backendNames(bool commaList) { return cli::oneOf(ds::backendNames(), commaList); }

CLI::Option* initMethod(CLI::App* app, std::string& url) {
  return app->add_option("--init-method", url, "env:// (default), tcp://HOST:PORT or file:///PATH")
      ->check(cli::checkedBy([](const std::string& t) { parseInitMethod(t); }))
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
      ->check(cli::checkedBy([](const std::string& t) { report::checkLabel(t, "--label"); }))
      ->envname("DSBENCH_LABEL");
}

CLI::Option* repeat(CLI::App* app, int& passes, const std::string& what) {
  return app
      ->add_option("--repeat", passes,
                   "passes over the " + what +
                       ", the order rotated each pass; every pass is kept in the JSON and dsreport compare "
                       "takes their median as this run's sample (it tests separate runs: compare 5 runs a side)")
      ->capture_default_str()
      ->transform(cli::integer(1, 1000))
      ->envname("DSBENCH_REPEAT");
}

CLI::Option* quiet(CLI::App* app, bool& verbose) {
  return app->add_flag("!--quiet", verbose, "do not log what init_distributed discovered");
}

}  // namespace ds::bench::flags
