//! The host program of isolated instances (`isolate: 'process'`): zgc-runtime starts one per
//! instance; see `zgc::isolate` and `zgc::host`.

#[cfg(target_os = "linux")]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(zgc::host::main(&args));
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("zgc-runtime-host: isolated instances run on Linux only");
    std::process::exit(2);
}
