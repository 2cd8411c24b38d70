#include "backend/cpu/elf_check.h"

#include <elf.h>

#include <cstring>

namespace kiln::cpu {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
#error "kiln's CPU backend knows x86_64 and aarch64 shared objects only"
#endif

// Loaded segments larger than this are not code kiln generated.
constexpr uint64_t kMaxMappedBytes = uint64_t{1} << 32;

bool inside(std::string_view object, uint64_t offset, uint64_t size) {
  return offset <= object.size() && size <= object.size() - offset;
}

template <typename T>
T read_at(std::string_view object, uint64_t offset) {
  T value;
  std::memcpy(&value, object.data() + offset, sizeof(T));
  return value;
}

}  // namespace

Result<std::set<std::string>> checked_dynamic_symbols(std::string_view object) {
  auto bad = [](const std::string& what) {
    return corruption("executable code is not a loadable shared object: " + what);
  };
  if (object.size() < sizeof(Elf64_Ehdr)) return bad("shorter than an ELF header");
  auto header = read_at<Elf64_Ehdr>(object, 0);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return bad("no ELF magic");
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_ident[EI_VERSION] != EV_CURRENT)
    return bad("not 64-bit little-endian ELF version 1");
  if (header.e_type != ET_DYN) return bad("not a shared object");
  if (header.e_machine != kHostMachine) return bad("built for another machine type");
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      !inside(object, header.e_phoff, uint64_t{header.e_phnum} * sizeof(Elf64_Phdr)))
    return bad("program headers lie outside the object");
  uint64_t mapped = 0;
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    auto ph = read_at<Elf64_Phdr>(object, header.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr));
    if (ph.p_type != PT_LOAD) continue;
    if (!inside(object, ph.p_offset, ph.p_filesz) || ph.p_filesz > ph.p_memsz ||
        ph.p_memsz > kMaxMappedBytes - mapped)
      return bad("segment " + std::to_string(i) + " lies outside the object or is too large");
    mapped += ph.p_memsz;
  }
  if (header.e_shentsize != sizeof(Elf64_Shdr) ||
      !inside(object, header.e_shoff, uint64_t{header.e_shnum} * sizeof(Elf64_Shdr)))
    return bad("section headers lie outside the object");
  auto section = [&](uint32_t index) {
    return read_at<Elf64_Shdr>(object, header.e_shoff + uint64_t{index} * sizeof(Elf64_Shdr));
  };
  std::set<std::string> names;
  bool found_table = false;
  for (uint16_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr symbols = section(i);
    if (symbols.sh_type != SHT_DYNSYM) continue;
    found_table = true;
    if (symbols.sh_entsize != sizeof(Elf64_Sym) ||
        !inside(object, symbols.sh_offset, symbols.sh_size) || symbols.sh_link >= header.e_shnum)
      return bad("the dynamic symbol table lies outside the object");
    Elf64_Shdr strings = section(symbols.sh_link);
    if (strings.sh_type != SHT_STRTAB || !inside(object, strings.sh_offset, strings.sh_size))
      return bad("the dynamic string table lies outside the object");
    std::string_view table = object.substr(strings.sh_offset, strings.sh_size);
    for (uint64_t s = 0; s < symbols.sh_size / sizeof(Elf64_Sym); ++s) {
      auto sym = read_at<Elf64_Sym>(object, symbols.sh_offset + s * sizeof(Elf64_Sym));
      if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;
      if (sym.st_name >= table.size()) return bad("a symbol name lies outside its table");
      size_t end = table.find('\0', sym.st_name);
      if (end == std::string_view::npos) return bad("a symbol name is not terminated");
      names.emplace(table.substr(sym.st_name, end - sym.st_name));
    }
  }
  if (!found_table) return bad("it has no dynamic symbol table");
  return names;
}

}  // namespace kiln::cpu
