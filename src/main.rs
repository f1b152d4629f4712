//! The `handshake` binary: parse, run, exit (0 ok, 1 check failed, 2 usage or setup error).

use clap::Parser;

fn main() {
    let cli = handshake::cli::Cli::parse();
    let code = match handshake::app::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("handshake: {e:#}");
            2
        }
    };
    std::process::exit(code);
}
