//! What kind of library a file is (its format, CPU and C library), so that an artifact built
//! for another platform is refused with what was given and what this platform takes, not with
//! the dynamic loader's words alone ("invalid ELF header", "Exec format error").

/// A library file's platform as far as its header tells: format, CPU, and for ELF whether it
/// links musl's or glibc's C library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryKind {
    pub format: &'static str,
    pub cpu: String,
    /// `Some("glibc")`, `Some("musl")`, or `None` when it needs no C library or is not ELF.
    pub libc: Option<&'static str>,
}

impl BinaryKind {
    fn describe(&self) -> String {
        // "an x86-64", "an aarch64", "an ELF machine 8", "a 32-bit ARM": as the words are said.
        let article = if self.cpu.starts_with(['a', 'e', 'i', 'o', 'u', 'x', 'E']) { "an" } else { "a" };
        match self.libc {
            Some(libc) => format!("{article} {} {} library linked against {libc}", self.cpu, self.format),
            None => format!("{article} {} {} library", self.cpu, self.format),
        }
    }
}

/// This build's platform, described as `identify` describes a file.
pub fn this_platform() -> BinaryKind {
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x86-64",
        "aarch64" => "aarch64",
        other => other,
    };
    let (format, libc) = if cfg!(windows) {
        ("PE", None)
    } else if cfg!(target_os = "macos") {
        ("Mach-O", None)
    } else if cfg!(target_env = "musl") {
        ("ELF", Some("musl"))
    } else {
        ("ELF", Some("glibc"))
    };
    BinaryKind { format, cpu: cpu.to_owned(), libc }
}

/// Why `bytes` (a library's file) cannot load on `here`, when its header shows another
/// platform's library; `None` when it looks loadable here or is no library of a known format.
pub fn mismatch(bytes: &[u8], here: &BinaryKind) -> Option<String> {
    let found = identify(bytes)?;
    let differs = found.format != here.format || found.cpu != here.cpu || (found.libc.is_some() && here.libc.is_some() && found.libc != here.libc);
    if !differs {
        return None;
    }
    let ext = match here.format {
        "PE" => ".dll",
        "Mach-O" => ".dylib",
        _ => ".so",
    };
    Some(format!("it is {}, and this platform loads {} ({ext}): build the artifact for this platform", found.describe(), here.describe()))
}

/// The platform of a library file from its first bytes (the whole file for ELF's C library).
pub fn identify(bytes: &[u8]) -> Option<BinaryKind> {
    if bytes.starts_with(b"\x7fELF") {
        return elf(bytes);
    }
    if bytes.starts_with(b"MZ") {
        // The PE header sits where the word at 0x3c says: a head too short to reach it tells nothing.
        let at = u32::from_le_bytes(bytes.get(0x3c..0x40)?.try_into().ok()?) as usize;
        if bytes.len() < at.checked_add(6)? {
            return None;
        }
        let cpu = pe_machine(bytes).unwrap_or("unknown CPU");
        return Some(BinaryKind { format: "PE", cpu: cpu.to_owned(), libc: None });
    }
    let magic = bytes.get(..4)?;
    if [[0xcf, 0xfa, 0xed, 0xfe], [0xce, 0xfa, 0xed, 0xfe], [0xca, 0xfe, 0xba, 0xbe]].iter().any(|m| m == magic) {
        let cpu = match bytes.get(4..8) {
            Some([0x07, 0, 0, 0x01]) => "x86-64",
            Some([0x0c, 0, 0, 0x01]) => "aarch64",
            _ => "universal or other",
        };
        return Some(BinaryKind { format: "Mach-O", cpu: cpu.to_owned(), libc: None });
    }
    None
}

fn pe_machine(bytes: &[u8]) -> Option<&'static str> {
    let at = u32::from_le_bytes(bytes.get(0x3c..0x40)?.try_into().ok()?) as usize;
    if bytes.get(at..at.checked_add(4)?)? != b"PE\0\0" {
        return None;
    }
    Some(match u16::from_le_bytes(bytes.get(at + 4..at + 6)?.try_into().ok()?) {
        0x8664 => "x86-64",
        0xaa64 => "aarch64",
        0x14c => "i386",
        _ => "unknown CPU",
    })
}

/// Little- or big-endian reads at offsets, none past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl Reader<'_> {
    fn u16(&self, at: usize) -> Option<u64> {
        let b: [u8; 2] = self.bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(u64::from(if self.little { u16::from_le_bytes(b) } else { u16::from_be_bytes(b) }))
    }
    fn u32(&self, at: usize) -> Option<u64> {
        let b: [u8; 4] = self.bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(u64::from(if self.little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) }))
    }
    fn u64(&self, at: usize) -> Option<u64> {
        let b: [u8; 8] = self.bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.little { u64::from_le_bytes(b) } else { u64::from_be_bytes(b) })
    }
    /// A word of the file's class: 8 bytes for ELF64, 4 for ELF32.
    fn word(&self, at: usize, wide: bool) -> Option<u64> {
        if wide {
            self.u64(at)
        } else {
            self.u32(at)
        }
    }
}

fn elf(bytes: &[u8]) -> Option<BinaryKind> {
    let wide = match bytes.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let r = Reader { bytes, little: *bytes.get(5)? == 1 };
    let cpu = match r.u16(18)? {
        62 => "x86-64".to_owned(),
        183 => "aarch64".to_owned(),
        3 => "i386".to_owned(),
        40 => "32-bit ARM".to_owned(),
        243 => "RISC-V".to_owned(),
        other => format!("ELF machine {other}"),
    };
    Some(BinaryKind { format: "ELF", cpu, libc: elf_libc(&r, wide) })
}

/// glibc or musl, from the C library the file names as needed (DT_NEEDED): glibc's is
/// `libc.so.6`, musl's `libc.so` (or Alpine's `libc.musl-<arch>.so.1`).
fn elf_libc(r: &Reader, wide: bool) -> Option<&'static str> {
    let (phoff, phentsize, phnum) = if wide { (r.u64(32)?, r.u16(54)?, r.u16(56)?) } else { (r.u32(28)?, r.u16(42)?, r.u16(44)?) };
    let header = |i: u64| -> Option<(u64, u64, u64, u64)> {
        let at = usize::try_from(phoff.checked_add(i.checked_mul(phentsize)?)?).ok()?;
        // (type, file offset, virtual address, file size)
        if wide {
            Some((r.u32(at)?, r.u64(at + 8)?, r.u64(at + 16)?, r.u64(at + 32)?))
        } else {
            Some((r.u32(at)?, r.u32(at + 4)?, r.u32(at + 8)?, r.u32(at + 16)?))
        }
    };
    const PT_LOAD: u64 = 1;
    const PT_DYNAMIC: u64 = 2;
    const DT_NEEDED: u64 = 1;
    const DT_STRTAB: u64 = 5;
    let headers: Vec<_> = (0..phnum.min(512)).filter_map(header).collect();
    let &(_, dyn_off, _, dyn_size) = headers.iter().find(|h| h.0 == PT_DYNAMIC)?;
    let entry = if wide { 16 } else { 8 };
    let mut needed = Vec::new();
    let mut strtab = None;
    for k in 0..(dyn_size / entry).min(4096) {
        let at = usize::try_from(dyn_off.checked_add(k * entry)?).ok()?;
        let tag = r.word(at, wide)?;
        let value = r.word(at + entry as usize / 2, wide)?;
        match tag {
            0 => break,
            DT_NEEDED => needed.push(value),
            DT_STRTAB => strtab = Some(value),
            _ => {}
        }
    }
    // The string table's address, as a file offset through the segment that maps it.
    let address = strtab?;
    let &(_, off, vaddr, _) = headers.iter().find(|h| h.0 == PT_LOAD && h.2 <= address && address - h.2 < h.3)?;
    let table = address - vaddr + off;
    let mut libc = None;
    for n in needed {
        let start = usize::try_from(table.checked_add(n)?).ok()?;
        let rest = r.bytes.get(start..)?;
        let name = &rest[..rest.iter().position(|&b| b == 0)?];
        if name == b"libc.so.6" {
            libc = Some("glibc");
        } else if name == b"libc.so" || name.starts_with(b"libc.musl-") {
            libc = Some("musl");
        }
    }
    libc
}
