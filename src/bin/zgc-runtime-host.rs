//! The host program of isolated instances (`isolate: 'process'`): zgc-runtime starts one per
//! instance; see `zgc_runtime::isolate`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(zgc_runtime::isolate::host::main(&args));
}
