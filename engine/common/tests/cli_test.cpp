// The shared flag checks (engine/common/cli.h) and the memory preflight (resources.h).
#include "engine/common/cli.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "engine/common/error.h"
#include "engine/host/resources.h"
#include "engine/testing/subprocess.h"

namespace ds {
namespace {

// The validator's message for `text` ("" when it passes), and the text it leaves for CLI11.
std::string check(const CLI::Validator& v, std::string& text) { return v(text); }
std::string check(const CLI::Validator& v, const std::string& text) {
  std::string t = text;
  return v(t);
}

TEST(CliChecks, IntegerRefusesJunkAndSaysTheRangeShortly) {
  auto v = cli::integer(1, 4096);
  std::string t = "010";
  EXPECT_EQ(check(v, t), "");
  EXPECT_EQ(t, "10") << "rewritten to decimal, so CLI11 never reads it as octal";
  EXPECT_EQ(check(v, "abc"), "'abc' is not a whole number; give a whole number from 1 to 4096.");
  EXPECT_EQ(check(v, ""), "the value is empty; give a whole number from 1 to 4096.");
  EXPECT_EQ(check(v, "0"), "'0' is out of range; give a whole number from 1 to 4096.");
  const std::string huge(300, '9');
  std::string msg = check(v, huge);
  EXPECT_NE(msg.find("out of range"), std::string::npos);
  EXPECT_LT(msg.size(), 140u) << "no 300-digit numbers: " << msg;
  EXPECT_NE(check(v, "nan"), "");
  EXPECT_NE(check(v, "1.5"), "");
  EXPECT_NE(check(v, "0x10"), "");
}

TEST(CliChecks, NumberRefusesNanInfAndOpenBounds) {
  auto v = cli::number(0, 3600, true);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "1e999", "", "-1", "0", "3601", "5s"}) {
    EXPECT_NE(check(v, bad), "") << bad;
  }
  EXPECT_EQ(check(v, "0.5"), "");
  EXPECT_EQ(check(v, "+2.5e1"), "");
  EXPECT_EQ(check(v, "nan"), "'nan' is not a finite number; give a number greater than 0 and at most 3600.");
  EXPECT_EQ(check(cli::number(0, 1e15), "-1"), "'-1' is out of range; give a number from 0 to 1e+15.");
}

TEST(CliChecks, ShownValuesAreShortAndPrintable) {
  EXPECT_EQ(cli::shown("a\xff\n"), "'a\\xff\\x0a'");
  EXPECT_EQ(cli::shown(std::string(100, 'x')), "'" + std::string(40, 'x') + "'... (100 characters)");
}

TEST(CliChecks, OneOfListsTheNames) {
  auto v = cli::oneOf({"nccl", "gloo"});
  EXPECT_EQ(check(v, "gloo"), "");
  EXPECT_EQ(check(v, "bogus"), "'bogus' is not one of nccl, gloo.");
  auto list = cli::oneOf({"nccl", "gloo"}, true);
  EXPECT_EQ(check(list, "gloo, nccl"), "");
  EXPECT_NE(check(list, "gloo,bogus"), "");
  EXPECT_NE(check(list, ","), "");
}

TEST(CliChecks, OutputFileIsCheckedBeforeAnyWork) {
  testing::TempDir dir;
  auto v = cli::outputFile();
  EXPECT_EQ(check(v, dir.file("result.json")), "");
  EXPECT_NE(check(v, dir.path()).find("is a directory"), std::string::npos);
  EXPECT_NE(check(v, dir.path() + "/").find("names a directory"), std::string::npos);
  EXPECT_NE(check(v, "/dev/zero").find("a device"), std::string::npos);
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  EXPECT_NE(check(v, dir.file("fifo")).find("FIFO"), std::string::npos);
  EXPECT_NE(check(v, dir.file("missing/x.json")).find("does not exist"), std::string::npos);
  EXPECT_NE(check(v, "").find("empty"), std::string::npos);
  // CLI11 gives an option that wants one value the next argument, even a flag: "-o --summary x".
  EXPECT_NE(check(v, "--summary").find("'--summary' is the next flag, not a file name"), std::string::npos);
  EXPECT_EQ(check(v, "./--summary"), "");
  auto in = cli::inputFile();
  EXPECT_NE(check(in, dir.path()).find("is a directory"), std::string::npos);
  EXPECT_NE(check(in, "/dev/zero").find("a device"), std::string::npos);
  EXPECT_NE(check(in, dir.file("missing")).find("does not exist"), std::string::npos);
}

TEST(CliChecks, CheckedByUsesTheToolsOwnMessage) {
  auto v = cli::checkedBy([](const std::string& t) {
    if (t != "ok") throw ConfigError("'" + t + "' is not ok");
  });
  EXPECT_EQ(check(v, "ok"), "");
  EXPECT_EQ(check(v, "no"), "'no' is not ok");
}

class CliParse : public ::testing::Test {
 protected:
  void SetUp() override {
    app.add_option("--count", count, "")->transform(cli::integer(1, 10))->envname("DS_CLI_TEST_COUNT");
    sub = app.add_subcommand("sub", "");
    sub->add_option("--db", db, "")->required()->envname("DS_CLI_TEST_DB");
  }
  void TearDown() override {
    ::unsetenv("DS_CLI_TEST_COUNT");
    ::unsetenv("DS_CLI_TEST_DB");
  }
  void parse(std::vector<const char*> argv) {
    argv.insert(argv.begin(), "tool");
    cli::parse(app, static_cast<int>(argv.size()), argv.data());
  }
  CLI::App app{"test"};
  CLI::App* sub = nullptr;
  int count = 0;
  std::string db;
};

TEST_F(CliParse, ABadTwinNamesTheVariable) {
  ::setenv("DS_CLI_TEST_COUNT", "abc", 1);
  try {
    parse({});
    FAIL() << "accepted DS_CLI_TEST_COUNT=abc";
  } catch (const CLI::ValidationError& e) {
    EXPECT_EQ(std::string(e.what()),
              "DS_CLI_TEST_COUNT (twin of --count): 'abc' is not a whole number; give a whole number from 1 "
              "to 10.");
  }
}

TEST_F(CliParse, TheFlagWinsOverItsTwinAndATwinCounts) {
  ::setenv("DS_CLI_TEST_COUNT", "abc", 1);
  parse({"--count", "3"});
  EXPECT_EQ(count, 3);
  ::setenv("DS_CLI_TEST_COUNT", "7", 1);
  parse({});
  EXPECT_EQ(count, 7);
}

TEST_F(CliParse, RequiredOptionMaySetByItsTwinOnlyWhenItsCommandRuns) {
  EXPECT_THROW(parse({"sub"}), CLI::RequiredError);
  ::setenv("DS_CLI_TEST_DB", "x.db", 1);
  parse({"sub"});
  EXPECT_EQ(db, "x.db");
}

TEST_F(CliParse, ABadFlagNamesTheFlag) {
  try {
    parse({"--count", "nan"});
    FAIL();
  } catch (const CLI::ValidationError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--count: 'nan' is not a whole number; give a whole number from 1 to 10.");
  }
}

// A tool's own parser names the flag itself (it also checks values from elsewhere); the flag, or the
// variable standing in for it, is then named once, in that place.
TEST(CliParseNames, AMessageThatNamesItsFlagIsNotPrefixedAgain) {
  CLI::App app{"test"};
  std::string label, op;
  auto own = [](const char* flag) {
    return cli::checkedBy([flag](const std::string& t) {
      if (t != "ok") throw ConfigError(std::string(flag) + " " + cli::shown(t) + " is not ok.");
    });
  };
  app.add_option("--label", label, "")->check(own("--label"))->envname("DS_CLI_TEST_LABEL");
  app.add_option("-o,--op", op, "")->check(own("-o/--op"));
  auto message = [&app](std::vector<const char*> argv) -> std::string {
    argv.insert(argv.begin(), "tool");
    try {
      cli::parse(app, static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ValidationError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(message({"--label", "x"}), "--label 'x' is not ok.");
  EXPECT_EQ(message({"-o", "x"}), "--op 'x' is not ok.");
  ::setenv("DS_CLI_TEST_LABEL", "y", 1);
  EXPECT_EQ(message({}), "DS_CLI_TEST_LABEL (twin of --label) 'y' is not ok.");
  ::unsetenv("DS_CLI_TEST_LABEL");
  // A message that does not start with the flag gets it in front, once.
  app.add_option("--n", label, "")->check(cli::oneOf({"a"}));
  EXPECT_EQ(message({"--n", "b"}), "--n: 'b' is not one of a.");
}

TEST(Resources, AvailableIsTheTighterOfMemAvailableAndTheCgroup) {
  sys::MemoryInfo m;
  EXPECT_EQ(m.available(), -1);
  m.memAvailable = 8LL << 30;
  EXPECT_EQ(m.available(), 8LL << 30);
  m.cgroupLimit = 4LL << 30;
  m.cgroupUsage = 1LL << 30;
  EXPECT_EQ(m.available(), 3LL << 30);
  EXPECT_NO_THROW(sys::checkMemory(2.0 * (1LL << 30), m, "x", "y"));
  try {
    sys::checkMemory(16.0 * (1LL << 30), m, "-e/--maxbytes 16 GiB", "Lower -e.");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "-e/--maxbytes 16 GiB needs about 16 GiB of memory, but this node has 3 GiB available (MemAvailable "
        "8 GiB; cgroup limit 4 GiB, 1 GiB used). Lower -e.");
  }
  EXPECT_NO_THROW(sys::checkMemory(1e30, sys::MemoryInfo{}, "x", "y")) << "nothing known: no refusal";
}

TEST(Resources, ThisMachineReportsItsMemory) {
  auto m = sys::readMemoryInfo();
  EXPECT_GT(m.memAvailable, 0) << "Linux has /proc/meminfo";
  EXPECT_GT(m.available(), 0);
}

TEST(Resources, BytesText) {
  EXPECT_EQ(sys::bytesText(100), "100 B");
  EXPECT_EQ(sys::bytesText(1536), "1.5 KiB");
  EXPECT_EQ(sys::bytesText(16.0 * (1LL << 30)), "16 GiB");
  EXPECT_EQ(sys::bytesText(1000.0 * (1 << 20)), "1000 MiB");
}

}  // namespace
}  // namespace ds
