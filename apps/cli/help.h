// The CLI's help, in one table (help.cc): `lfmvox help`, `lfmvox CMD --help`, `lfmvox --version` and
// the man page (`lfmvox --man`, installed as lfmvox.1) are all printed from it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lfmvox_cli {

struct OptionHelp {
  const char* flags;  // "--model DIR", "-o, --output F", "TEXT" (a positional)
  const char* text;   // what it does, one line
};

struct CommandHelp {
  const char* name;      // "detokenize"
  const char* summary;   // one line: what it turns into what
  const char* synopsis;  // the arguments after the command name
  std::vector<OptionHelp> options;
  const char* notes;  // more lines for the command's --help and the man page, or ""
};

// Every command, in the order `lfmvox help` lists them.
const std::vector<CommandHelp>& Commands();
// The command called `name`, or null.
const CommandHelp* FindCommand(std::string_view name);

// "lfmvox MAJOR.MINOR.PATCH" (the library linked), the `--version` line.
std::string VersionText();
// `lfmvox help`: the usage line and every command with its options.
std::string UsageText();
// `lfmvox CMD --help`: one command.
std::string CommandHelpText(const CommandHelp& command);
// `lfmvox --man`: the man page (roff, man(7) macros).
std::string ManPage();

}  // namespace lfmvox_cli
