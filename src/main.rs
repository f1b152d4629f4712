//! The `handshake` binary: parse, run, exit (0 ok, 1 check failed, 2 usage or setup
//! error). Its whole work is the library's `main`.

#![forbid(unsafe_code)]

fn main() {
    std::process::exit(handshake::main());
}
