"""Checks on the built shared object: what the loader would do with it before any call.

The source checks refuse the spellings; this reads what the compiler and linker actually made,
so that nothing a macro, a nested function or a linker default produced can slip through. An
object is refused when loading it would

- make the stack executable (``PT_GNU_STACK`` with ``PF_X``, or no ``PT_GNU_STACK`` at all):
  GCC asks for one when a nested function's address is taken (a trampoline on the stack), and
  with it, machine code a kernel writes into a stack array could be called;
- map memory writable and executable, or data executable (an executable ``PT_LOAD`` segment
  holding a section that is not code), or write into its code (text relocations);
- run code before or after any call: ``DT_INIT`` / ``DT_FINI`` and their arrays,
  ``.init_array`` / ``.preinit_array`` / ``.ctors`` / ``.fini_array`` / ``.dtors`` sections, and
  the resolvers of indirect functions (``STT_GNU_IFUNC`` symbols, ``IRELATIVE`` relocations).
  Kernels are linked with ``-nostartfiles`` (``compiler.LINK_FLAGS``), so an innocent kernel has
  none of these (crtbeginS.o's ``frame_dummy`` and crti.o's ``_init`` are not linked in) but the
  toolchain's own ``TOOLCHAIN_INITIALIZERS``: on aarch64 below armv8.1, an atomic links libgcc's
  outline atomics, whose probe for LSE instructions is in ``.init_array``. Each entry of an init
  array must be such a function, found by its address and by the object file it came from (the
  ``STT_FILE`` symbol before it, which a kernel cannot name: ``#line`` and ``asm`` are refused);
- load a library other than ``ALLOWED_LIBRARIES``, or look for libraries or audit modules
  elsewhere (``DT_RPATH``, ``DT_RUNPATH``, ``DT_AUDIT``, filters).

The ELF file is parsed here with ``struct`` (ELF64 little-endian: x86-64 and aarch64, whose
``IRELATIVE`` relocation types are known; on another machine the other checks still apply).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ALLOWED_LIBRARIES = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libmvec.so.1",
        "libgomp.so.1",
        "libgcc_s.so.1",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
    }
)

# Load-time functions the toolchain itself links in, as (object file, function).
TOOLCHAIN_INITIALIZERS = frozenset({("lse-init.o", "init_have_lse_atomics")})

EM_X86_64, EM_AARCH64 = 62, 183
_RELATIVE = {EM_X86_64: 8, EM_AARCH64: 1027}  # R_X86_64_RELATIVE, R_AARCH64_RELATIVE
_IRELATIVE = {EM_X86_64: 37, EM_AARCH64: 1032}  # R_X86_64_IRELATIVE, R_AARCH64_IRELATIVE
_ET_DYN = 3
_PT_LOAD, _PT_DYNAMIC, _PT_GNU_STACK = 1, 2, 0x6474E551
_PF_X, _PF_W = 1, 2
_SHF_ALLOC, _SHF_EXECINSTR = 2, 4
_SHT_SYMTAB, _SHT_RELA, _SHT_REL, _SHT_DYNSYM = 2, 4, 9, 11
_SHT_INIT_ARRAY, _SHT_FINI_ARRAY, _SHT_PREINIT_ARRAY = 14, 15, 16
_STT_FUNC, _STT_FILE, _STT_GNU_IFUNC = 2, 4, 10
_DT_NEEDED, _DT_STRTAB, _DT_TEXTREL, _DT_FLAGS, _DF_TEXTREL = 1, 5, 22, 30, 0x4
_DT_INIT_ARRAY, _DT_INIT_ARRAYSZ = 25, 27

# Dynamic tags that run code at load or unload time (DT_INIT_ARRAY: see _check_init_array).
_RUNS_CODE = {12: "DT_INIT", 13: "DT_FINI", 26: "DT_FINI_ARRAY", 32: "DT_PREINIT_ARRAY"}
# Dynamic tags that make the loader read other files.
_LOADS_FILES = {
    15: "DT_RPATH",
    29: "DT_RUNPATH",
    0x6FFFFEFC: "DT_AUDIT",
    0x6FFFFEFB: "DT_DEPAUDIT",
    0x7FFFFFFD: "DT_AUXILIARY",
    0x7FFFFFFF: "DT_FILTER",
}
_AT_LOAD = "code that runs when it is loaded or unloaded"
_RESOLVER = "its resolver would run when the object is loaded"
_LOAD_TIME_SECTIONS = (".preinit_array", ".ctors", ".fini_array", ".dtors")

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SEGMENT = struct.Struct("<IIQQQQQQ")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_DYN = struct.Struct("<qQ")
_SYMBOL = struct.Struct("<IBBHQQ")
_RELA, _REL = struct.Struct("<QQq"), struct.Struct("<QQ")


class ElfError(ValueError):
    """The file is not an ELF64 little-endian shared object this module can read."""


@dataclass(frozen=True)
class _Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class _Elf:
    data: bytes | mmap.mmap
    machine: int
    segments: tuple[_Segment, ...]
    sections: tuple[_Section, ...]


def check_object(path: Path) -> str | None:
    """Why loading the shared object at ``path`` must not happen (one sentence), or None."""
    try:
        with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            elf = _parse(data)
            return (
                _check_segments(elf)
                or _check_dynamic(elf)
                or _check_sections(elf)
                or _check_symbols(elf)
                or _check_relocations(elf)
            )
    except (ValueError, struct.error, IndexError, OSError) as exc:  # ElfError is a ValueError
        return f"the built object cannot be read as a 64-bit little-endian ELF file ({exc})"


def _parse(data: bytes | mmap.mmap) -> _Elf:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError("not ELF64 little-endian")
    header = _HEADER.unpack_from(data, 0)
    e_type, machine, phoff, shoff = header[1], header[2], header[5], header[6]
    phentsize, phnum, shentsize, shnum, shstrndx = header[9:14]
    if e_type != _ET_DYN:
        raise ElfError("not a shared object")
    if phentsize != _SEGMENT.size or (shnum and shentsize != _SECTION.size):
        raise ElfError("unexpected header sizes")
    segments = tuple(_segment(data, phoff + i * phentsize) for i in range(phnum))
    raw = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names = raw[shstrndx][4] if shstrndx < len(raw) else 0
    sections = tuple(
        _Section(_string(data, names + s[0]), s[1], s[2], s[3], s[4], s[5], s[6], s[9]) for s in raw
    )
    return _Elf(data, machine, segments, sections)


def _segment(data: bytes | mmap.mmap, offset: int) -> _Segment:
    p_type, flags, p_offset, vaddr, _paddr, filesz, memsz, _align = _SEGMENT.unpack_from(
        data, offset
    )
    return _Segment(p_type, flags, p_offset, vaddr, filesz, memsz)


def _string(data: bytes | mmap.mmap, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        raise ElfError("a string runs past the end of the file")
    return bytes(data[offset:end]).decode("utf-8", "replace")


def _check_segments(elf: _Elf) -> str | None:
    stacks = [s for s in elf.segments if s.type == _PT_GNU_STACK]
    if not stacks:
        return (
            "the built object has no PT_GNU_STACK header, so loading it would make the stack "
            "executable"
        )
    if any(s.flags & _PF_X for s in stacks):
        return (
            "the built object asks for an executable stack (a nested function whose address "
            "is taken needs one): define functions at file scope"
        )
    loads = [s for s in elf.segments if s.type == _PT_LOAD]
    if any(s.flags & _PF_W and s.flags & _PF_X for s in loads):
        return "the built object has a segment that is both writable and executable"
    for section in elf.sections:
        data = section.flags & _SHF_ALLOC and not section.flags & _SHF_EXECINSTR
        if data and section.size and any(s.flags & _PF_X and _overlaps(s, section) for s in loads):
            return f"the built object maps data ({section.name}) executable"
    return None


def _overlaps(segment: _Segment, section: _Section) -> bool:
    start, end = segment.vaddr, segment.vaddr + segment.memsz
    return section.addr < end and start < section.addr + section.size


def _dynamic(elf: _Elf) -> Iterator[tuple[int, int]]:
    """The entries of the dynamic segment, as the loader reads them (up to DT_NULL)."""
    for segment in elf.segments:
        if segment.type != _PT_DYNAMIC:
            continue
        for offset in range(segment.offset, segment.offset + segment.filesz, _DYN.size):
            tag, value = _DYN.unpack_from(elf.data, offset)
            if tag == 0:
                break
            yield tag, value


def _check_dynamic(elf: _Elf) -> str | None:
    entries = list(_dynamic(elf))
    for tag, value in entries:
        if tag in _RUNS_CODE:
            return f"the built object has {_AT_LOAD} ({_RUNS_CODE[tag]})"
        if tag in _LOADS_FILES:
            return f"the built object tells the loader to read other files ({_LOADS_FILES[tag]})"
        if tag == _DT_TEXTREL or (tag == _DT_FLAGS and value & _DF_TEXTREL):
            return "the built object has text relocations: its code would be written at load time"
    tags = dict(entries)
    if _DT_INIT_ARRAY in tags:
        reason = _check_init_array(elf, tags[_DT_INIT_ARRAY], tags.get(_DT_INIT_ARRAYSZ, 0))
        if reason:
            return f"{reason} (DT_INIT_ARRAY)"
    return _check_needed(elf, entries)


def _check_needed(elf: _Elf, entries: list[tuple[int, int]]) -> str | None:
    strtab = next((value for tag, value in entries if tag == _DT_STRTAB), None)
    for tag, value in entries:
        if tag != _DT_NEEDED:
            continue
        if strtab is None:
            return "the built object needs a library whose name it does not say"
        name = _string(elf.data, _file_offset(elf, strtab) + value)
        if name not in ALLOWED_LIBRARIES:
            allowed = "allowed: " + ", ".join(sorted(ALLOWED_LIBRARIES))
            return f"the built object needs {name}, which a kernel may not load ({allowed})"
    return None


def _file_offset(elf: _Elf, address: int) -> int:
    for s in elf.segments:
        if s.type == _PT_LOAD and s.vaddr <= address < s.vaddr + s.filesz:
            return s.offset + address - s.vaddr
    raise ElfError(f"address {address:#x} is in no loaded segment")


def _check_sections(elf: _Elf) -> str | None:
    for section in elf.sections:
        if not section.size:
            continue
        if section.type == _SHT_INIT_ARRAY or section.name == ".init_array":
            reason = _check_init_array(elf, section.addr, section.size)
            if reason:
                return f"{reason} ({section.name})"
        elif section.type in (_SHT_FINI_ARRAY, _SHT_PREINIT_ARRAY) or (
            section.name in _LOAD_TIME_SECTIONS
        ):
            return f"the built object has a {section.name} section, {_AT_LOAD}"
    return None


def _check_init_array(elf: _Elf, address: int, size: int) -> str | None:
    """None when every entry of the init array at ``address`` is one of the toolchain's own
    ``TOOLCHAIN_INITIALIZERS``; else the reason, naming the function when it has a name."""
    slots = _relative_relocations(elf)
    functions = _functions(elf)
    for slot in range(address, address + size, 8):
        target = slots.get(slot)
        origin = functions.get(target) if target is not None else None
        if origin not in TOOLCHAIN_INITIALIZERS:
            name = f" {origin[1]}()" if origin else ""
            return f"the built object has {_AT_LOAD}: function{name} in its init array"
    return None


def _relative_relocations(elf: _Elf) -> dict[int, int]:
    """Where each RELATIVE relocation writes (a slot's address) and what (an address)."""
    relative = _RELATIVE.get(elf.machine)
    slots: dict[int, int] = {}
    for table in elf.sections:
        if table.type != _SHT_RELA or relative is None:
            continue
        for offset in range(table.offset, table.offset + table.size, _RELA.size):
            r_offset, info, addend = _RELA.unpack_from(elf.data, offset)
            if info & 0xFFFFFFFF == relative:
                slots[r_offset] = addend
    return slots


def _functions(elf: _Elf) -> dict[int, tuple[str, str]]:
    """The functions of the symbol table by address, as (their object file, their name): the
    local symbols of a file follow its STT_FILE symbol (a global one has no file: "")."""
    functions: dict[int, tuple[str, str]] = {}
    origin = ""
    for names, (name, info, _, _, value, _) in _symbols(elf, _SHT_SYMTAB):
        if info & 0xF == _STT_FILE:
            origin = _string(elf.data, names + name)
        elif info & 0xF == _STT_FUNC:
            local = info >> 4 == 0  # STB_LOCAL
            functions.setdefault(value, (origin if local else "", _string(elf.data, names + name)))
    return functions


def _symbols(elf: _Elf, *types: int) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Each symbol in the tables of these types: (where its table's strings are, the raw entry:
    name, info, other, shndx, value, size)."""
    for table in elf.sections:
        if table.type not in types or table.link >= len(elf.sections):
            continue
        names = elf.sections[table.link].offset
        for offset in range(table.offset, table.offset + table.size, _SYMBOL.size):
            yield names, _SYMBOL.unpack_from(elf.data, offset)


def _check_symbols(elf: _Elf) -> str | None:
    for names, symbol in _symbols(elf, _SHT_SYMTAB, _SHT_DYNSYM):
        if symbol[1] & 0xF == _STT_GNU_IFUNC:
            name = _string(elf.data, names + symbol[0])
            return f"the built object has an indirect function ({name}): {_RESOLVER}"
    return None


def _check_relocations(elf: _Elf) -> str | None:
    irelative = _IRELATIVE.get(elf.machine)
    if irelative is None:
        return None
    for table in elf.sections:
        if table.type not in (_SHT_RELA, _SHT_REL):
            continue
        entry = _RELA if table.type == _SHT_RELA else _REL
        for offset in range(table.offset, table.offset + table.size, entry.size):
            if entry.unpack_from(elf.data, offset)[1] & 0xFFFFFFFF == irelative:
                return f"the built object has an IRELATIVE relocation: {_RESOLVER}"
    return None
