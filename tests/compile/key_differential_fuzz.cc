// Differential fuzzer of kiln's cache-key canonical form: mutates real programs (operands swapped,
// symbols renamed, `loc` in odd places, tokens inserted and deleted, ops reordered, constants and
// types changed) and checks that two programs with the same canonical form are the same program
// to MLIR: the same generic form, or both rejected. A merge is the worst bug kiln can have: the
// second program would run the first one's code from the cache.
//
//   kiln_key_fuzz [--mutations N] [--seed S] PROGRAM.mlir...
//
// Exits 1 when it finds a merge (and prints both programs), 0 otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compile/text_canonical.h"
#include "kiln/file.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"

namespace {

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  std::string mutate(std::string program) {
    int count = 1 + pick(3);
    for (int i = 0; i < count; ++i) program = mutate_once(program);
    return program;
  }

 private:
  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

  // Positions where one token ends and another may begin (after spaces and punctuation).
  std::vector<size_t> boundaries(const std::string& s) {
    std::vector<size_t> out;
    for (size_t i = 1; i < s.size(); ++i)
      if (s[i - 1] == ' ' || s[i - 1] == '\n' || s[i - 1] == '(' || s[i - 1] == ',' ||
          s[i - 1] == ')' || s[i] == ' ' || s[i] == '\n')
        out.push_back(i);
    return out;
  }

  std::vector<std::pair<size_t, size_t>> matches(const std::string& s, const std::regex& re) {
    std::vector<std::pair<size_t, size_t>> out;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
      out.push_back({static_cast<size_t>(it->position()), static_cast<size_t>(it->length())});
    return out;
  }

  std::string replace_one(std::string s, const std::regex& re,
                          const std::function<std::string(const std::string&)>& with) {
    auto found = matches(s, re);
    if (found.empty()) return s;
    auto [pos, len] = found[pick(found.size())];
    return s.replace(pos, len, with(s.substr(pos, len)));
  }

  std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
    std::regex re(std::regex_replace(from, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                  R"((?![A-Za-z0-9_$.\-]))");
    return std::regex_replace(s, re, to);
  }

  std::string mutate_once(const std::string& s) {
    static const std::regex operand_pair(R"(%[A-Za-z0-9_]+, %[A-Za-z0-9_]+)");
    static const std::regex symbol(R"(@[A-Za-z_][A-Za-z0-9_]*)");
    static const std::regex value(R"(%[A-Za-z_][A-Za-z0-9_]*|%[0-9]+)");
    static const std::regex number(R"(\b[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?\b)");
    static const std::regex type(R"(\b(f32|f64|i32|i64|f16|i1|index)\b)");
    static const std::vector<std::string> tokens = {" loc(\"x\":1:2)",
                                                    " loc(unknown)",
                                                    " loc(#loc9)",
                                                    " loc(",
                                                    ")",
                                                    " %0",
                                                    ",",
                                                    " @loc",
                                                    "// note\n",
                                                    "  ",
                                                    "\n",
                                                    " loc(\"y\")",
                                                    " loc(\"f\":99999999999:1)",
                                                    " loc(callsite(\"a\" at \"b\":1:1))",
                                                    " loc(fused[\"a\":1:1, unknown])",
                                                    " \"s\"",
                                                    " {}",
                                                    " loc(bogus)",
                                                    " loc(\"a\":1)",
                                                    " {foo = loc(\"z\":3:4)}",
                                                    " loc(\"bad\\q\")",
                                                    " loc",
                                                    "#loc9 = loc(\"m\":1:1)\n"};
    switch (pick(11)) {
      case 0:  // swap two operands
        return replace_one(s, operand_pair, [](const std::string& m) {
          size_t comma = m.find(", ");
          return m.substr(comma + 2) + ", " + m.substr(0, comma);
        });
      case 1: {  // rename a symbol everywhere (a different program), often to @loc
        auto found = matches(s, symbol);
        if (found.empty()) return s;
        auto [pos, len] = found[pick(found.size())];
        std::string from = s.substr(pos, len);
        return replace_all(s, from, pick(2) ? "@loc" : "@renamed");
      }
      case 2:  // rename one occurrence of a symbol (usually invalid)
        return replace_one(s, symbol, [&](const std::string&) { return std::string("@loc"); });
      case 3: {  // insert a token at a boundary
        auto b = boundaries(s);
        if (b.empty()) return s;
        return std::string(s).insert(b[pick(b.size())], tokens[pick(tokens.size())]);
      }
      case 4: {  // reorder two adjacent lines
        std::vector<std::string> lines;
        std::stringstream in(s);
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        if (lines.size() < 3) return s;
        size_t i = 1 + pick(lines.size() - 2);
        std::swap(lines[i], lines[i - 1]);
        std::string out;
        for (const std::string& line : lines) out += line + "\n";
        return out;
      }
      case 5:  // change a constant (sometimes to the same value spelled differently)
        return replace_one(s, number, [&](const std::string& m) {
          switch (pick(3)) {
            case 0:
              return m + "0";
            case 1:
              return "0" + m;
            default:
              return std::to_string(pick(10));
          }
        });
      case 6:  // change one type
        return replace_one(s, type, [&](const std::string&) {
          static const char* types[] = {"f32", "f64", "i32", "i64", "index"};
          return std::string(types[pick(5)]);
        });
      case 7: {  // rename an SSA value everywhere (the same program)
        auto found = matches(s, value);
        if (found.empty()) return s;
        auto [pos, len] = found[pick(found.size())];
        return replace_all(s, s.substr(pos, len), pick(2) ? "%renamed_v" : "%loc");
      }
      case 8: {  // delete one token
        auto b = boundaries(s);
        if (b.size() < 2) return s;
        size_t i = pick(b.size() - 1);
        return std::string(s).erase(b[i], b[i + 1] - b[i]);
      }
      case 9: {  // a trailing location at the end of some line
        std::vector<size_t> ends;
        for (size_t i = 0; i < s.size(); ++i)
          if (s[i] == '\n') ends.push_back(i);
        if (ends.empty()) return s;
        std::string loc =
            " loc(\"f.py\":" + std::to_string(pick(50)) + ":" + std::to_string(pick(9)) + ")";
        return std::string(s).insert(ends[pick(ends.size())], loc);
      }
      default: {  // layout only
        auto b = boundaries(s);
        if (b.empty()) return s;
        return std::string(s).insert(b[pick(b.size())], pick(2) ? "\n  " : " ");
      }
    }
  }

  std::mt19937 rng_;
};

// The program as MLIR reads it: its verified generic form, or "" when MLIR rejects it.
std::string generic_form(mlir::MLIRContext& context, const std::string& text) {
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic&) { return mlir::success(); });
  mlir::ParserConfig config(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, config);
  if (!module || mlir::failed(mlir::verify(*module))) return "";
  std::string out;
  llvm::raw_string_ostream os(out);
  module->print(os, mlir::OpPrintingFlags().printGenericOpForm());
  return out;
}

// The same in a child process: MLIR's own parsers crash on some malformed input (linalg.reduce
// in LLVM 22), which counts as rejected here. `crashed` reports it.
std::string generic_form_isolated(mlir::MLIRContext& context, const std::string& text,
                                  bool* crashed) {
  *crashed = false;
  int fds[2];
  if (pipe(fds) != 0) return generic_form(context, text);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out = generic_form(context, text);
    size_t done = 0;
    while (done < out.size()) {
      ssize_t w = write(fds[1], out.data() + done, out.size() - done);
      if (w <= 0) _exit(3);
      done += size_t(w);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buffer[65536];
  for (ssize_t r; (r = read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, size_t(r));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *crashed = true;
    return "";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 2000;
  uint32_t seed = 1;
  std::vector<std::string> seeds;
  std::string crash_dir;  // where programs that crash MLIR's parser are written
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--save-crashes" && i + 1 < argc) {
      crash_dir = argv[++i];
    } else if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::atol(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = static_cast<uint32_t>(std::atol(argv[++i]));
    } else {
      auto text = kiln::read_file(arg);
      if (!text.ok() || text->empty()) {
        std::cerr << "kiln_key_fuzz: cannot read " << arg << "\n";
        return 2;
      }
      seeds.push_back(std::move(*text));
    }
  }
  if (seeds.empty()) {
    std::cerr
        << "usage: kiln_key_fuzz [--mutations N] [--seed S] [--save-crashes DIR] PROGRAM.mlir...\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::MLIRContext context(registry);
  context.disableMultithreading();

  Mutator mutator(seed);
  struct Seen {
    std::string generic;
    std::string program;
  };
  std::map<std::string, Seen> by_key;  // canonical form -> the first program with it
  long parser_crashes = 0;
  long merges = 0, scanned = 0, left_to_mlir = 0, rejected = 0, shared_keys = 0;
  std::map<std::string, std::set<std::string>> keys_of_program;
  for (long m = 0; m < mutations; ++m) {
    const std::string& base = seeds[m % seeds.size()];
    std::string program = m < long(seeds.size()) ? base : mutator.mutate(base);
    auto canonical = kiln::canonicalize_mlir_text(program, /*keep_locations=*/false);
    if (!canonical) {
      ++left_to_mlir;  // keyed on MLIR's own bytecode of the parsed module: sound by construction
      continue;
    }
    ++scanned;
    bool crashed = false;
    std::string generic = generic_form_isolated(context, program, &crashed);
    if (generic.empty()) ++rejected;
    if (crashed && ++parser_crashes && !crash_dir.empty()) {
      std::ofstream(crash_dir + "/crash-" + std::to_string(m) + ".mlir", std::ios::binary)
          << program;
    }
    auto [it, inserted] = by_key.emplace(canonical->text, Seen{generic, program});
    if (!generic.empty()) keys_of_program[generic].insert(canonical->text);
    if (inserted) continue;
    ++shared_keys;
    if (it->second.generic != generic) {
      if (++merges <= 3) {
        std::cout << "MERGE: two programs share a key but MLIR reads them differently ("
                  << (it->second.generic.empty() ? "first rejected" : "first valid") << ", "
                  << (generic.empty() ? "second rejected" : "second valid") << ")\n--- first ---\n"
                  << it->second.program << "\n--- second ---\n"
                  << program << "\n";
      }
    }
  }
  long split = 0;
  for (const auto& [generic, keys] : keys_of_program) split += long(keys.size()) - 1;
  std::cout << "kiln_key_fuzz: " << mutations << " programs (seed " << seed << "), " << scanned
            << " keyed by the scan, " << left_to_mlir << " left to MLIR, " << rejected
            << " rejected by MLIR (" << parser_crashes << " crashing its parser), " << shared_keys
            << " sharing a key with an earlier one, " << merges << " merges; "
            << keys_of_program.size() << " distinct valid programs, " << split
            << " extra keys for the same program (misses, not errors)\n";
  return merges == 0 ? 0 : 1;
}
