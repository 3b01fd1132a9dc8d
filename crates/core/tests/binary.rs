//! Telling another platform's library from this one's, from headers built here byte by byte.
use zgc_runtime_core::binary::{identify, mismatch, BinaryKind};

/// A minimal little-endian ELF64 shared library: one PT_LOAD mapping the file at `base`, and a
/// PT_DYNAMIC whose DT_NEEDED entries name `needed`.
fn elf64(machine: u16, needed: &[&str]) -> Vec<u8> {
    let base = 0x10000u64;
    let mut strtab = vec![0u8];
    let offsets: Vec<u64> = needed
        .iter()
        .map(|n| {
            let at = strtab.len() as u64;
            strtab.extend_from_slice(n.as_bytes());
            strtab.push(0);
            at
        })
        .collect();
    let phoff = 64u64;
    let dyn_off = phoff + 2 * 56;
    let dyn_len = (offsets.len() as u64 + 2) * 16;
    let str_off = dyn_off + dyn_len;
    let total = str_off + strtab.len() as u64;
    let mut f = vec![0u8; 64];
    f[..4].copy_from_slice(b"\x7fELF");
    f[4] = 2; // ELF64
    f[5] = 1; // little-endian
    f[6] = 1;
    f[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    f[18..20].copy_from_slice(&machine.to_le_bytes());
    f[32..40].copy_from_slice(&phoff.to_le_bytes());
    f[54..56].copy_from_slice(&56u16.to_le_bytes());
    f[56..58].copy_from_slice(&2u16.to_le_bytes());
    let ph = |kind: u32, off: u64, vaddr: u64, size: u64| {
        let mut h = vec![0u8; 56];
        h[..4].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&off.to_le_bytes());
        h[16..24].copy_from_slice(&vaddr.to_le_bytes());
        h[32..40].copy_from_slice(&size.to_le_bytes());
        h
    };
    f.extend(ph(1, 0, base, total));
    f.extend(ph(2, dyn_off, base + dyn_off, dyn_len));
    for o in &offsets {
        f.extend(1u64.to_le_bytes());
        f.extend(o.to_le_bytes());
    }
    f.extend(5u64.to_le_bytes());
    f.extend((base + str_off).to_le_bytes());
    f.extend([0u8; 16]);
    f.extend(strtab);
    f
}

fn glibc_x64() -> BinaryKind {
    BinaryKind { format: "ELF", cpu: "x86-64".into(), libc: Some("glibc") }
}

#[test]
fn elf_cpu_and_c_library_from_the_headers() {
    assert_eq!(identify(&elf64(62, &["libm.so.6", "libc.so.6"])), Some(glibc_x64()));
    assert_eq!(identify(&elf64(183, &["libc.so"])), Some(BinaryKind { format: "ELF", cpu: "aarch64".into(), libc: Some("musl") }));
    assert_eq!(identify(&elf64(62, &["libc.musl-x86_64.so.1"])).unwrap().libc, Some("musl"));
    // Needing no C library at all: nothing to say about one.
    assert_eq!(identify(&elf64(62, &[])).unwrap().libc, None);
}

#[test]
fn another_platforms_library_is_named_with_what_this_platform_takes() {
    let here = glibc_x64();
    assert_eq!(mismatch(&elf64(62, &["libc.so.6"]), &here), None);
    assert_eq!(
        mismatch(&elf64(183, &["libc.so.6"]), &here).unwrap(),
        "it is an aarch64 ELF library linked against glibc, and this platform loads an x86-64 ELF library linked against glibc (.so): build the artifact for this platform"
    );
    assert!(mismatch(&elf64(62, &["libc.so"]), &here).unwrap().starts_with("it is an x86-64 ELF library linked against musl, and this platform loads"));
    // A library that needs no C library loads with either.
    assert_eq!(mismatch(&elf64(62, &[]), &here), None);
}

#[test]
fn windows_and_macos_libraries_are_recognised() {
    let mut pe = vec![0u8; 0x100];
    pe[..2].copy_from_slice(b"MZ");
    pe[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    pe[0x80..0x84].copy_from_slice(b"PE\0\0");
    pe[0x84..0x86].copy_from_slice(&0x8664u16.to_le_bytes());
    assert_eq!(identify(&pe), Some(BinaryKind { format: "PE", cpu: "x86-64".into(), libc: None }));
    assert!(mismatch(&pe, &glibc_x64()).unwrap().starts_with("it is an x86-64 PE library, and this platform loads an x86-64 ELF library linked against glibc (.so)"));
    // A head that stops before the PE header (MinGW puts it at 0x80) says nothing yet, rather
    // than "unknown CPU": the loader's first read must reach it.
    assert_eq!(identify(&pe[..64]), None);
    assert_eq!(identify(&pe[..0x85]), None);
    assert_eq!(identify(&pe[..0x86]), Some(BinaryKind { format: "PE", cpu: "x86-64".into(), libc: None }));
    pe[0x84..0x86].copy_from_slice(&0x1234u16.to_le_bytes());
    assert_eq!(identify(&pe).unwrap().cpu, "unknown CPU");
    let macho = [0xcf, 0xfa, 0xed, 0xfe, 0x0c, 0, 0, 0x01, 0, 0, 0, 0];
    assert_eq!(identify(&macho), Some(BinaryKind { format: "Mach-O", cpu: "aarch64".into(), libc: None }));
}

#[test]
fn text_and_truncated_headers_are_no_library() {
    assert_eq!(identify(b"this is text, not ELF\n"), None);
    assert_eq!(identify(b""), None);
    let whole = elf64(183, &["libc.so.6"]);
    // Every prefix identifies or not, without panicking; the CPU is known from 20 bytes on.
    for n in 0..whole.len() {
        let got = identify(&whole[..n]);
        if n >= 20 {
            assert_eq!(got.unwrap().cpu, "aarch64");
        }
    }
}
