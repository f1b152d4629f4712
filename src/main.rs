//! The `handshake` binary: parse, run, exit (0 ok, 1 check failed, 2 usage or setup error).

fn main() {
    let cli = match handshake::cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            // A flag from curl or another load tool: say which flag it is here.
            let foreign = (e.kind() == clap::error::ErrorKind::UnknownArgument)
                .then(|| e.get(clap::error::ContextKind::InvalidArg))
                .flatten()
                .and_then(|arg| handshake::cli::foreign_flag(&arg.to_string()));
            match foreign {
                Some(msg) => {
                    handshake::progress::note(&format!("handshake: {msg}"));
                    std::process::exit(2);
                }
                None => e.exit(),
            }
        }
    };
    // Without root, a lab run gets a user namespace of its own (where the kernel allows
    // it) before any thread starts: a user namespace can only be entered single-threaded.
    if cli.command.needs_lab() {
        handshake::lab::netns::try_user_namespace();
    }
    let code = match handshake::cmd::run(cli) {
        Ok(code) => code,
        // A reader that stopped reading (`handshake man | head`) is not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            0
        }
        Err(e) => {
            handshake::progress::note(&format!("handshake: {e:#}"));
            // Ctrl-C that left nothing to report is still an interrupt.
            if handshake::interrupt::requested() {
                handshake::interrupt::exit_status()
            } else {
                2
            }
        }
    };
    std::process::exit(code);
}
