//! `handshake completions SHELL` and `handshake man`: generated from the command-line
//! definitions themselves (clap_complete, clap_mangen), so they never drift from them.

use std::io::Write as _;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};

pub fn completions(a: CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a write error, and a reader that stops
    // early (`| grep -q`) is not an error.
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "handshake", &mut buf);
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(0)
}

pub fn man(a: ManArgs) -> anyhow::Result<i32> {
    let cmd = Cli::command();
    let Some(dir) = a.out else {
        let mut out = std::io::stdout().lock();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        out.flush()?;
        return Ok(0);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("--out {}", dir.display()))?;
    let mut written = Vec::new();
    let mut page = |name: String, cmd: clap::Command| -> anyhow::Result<()> {
        let path = dir.join(format!("{name}.1"));
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut buf)?;
        std::fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    page("handshake".into(), cmd.clone())?;
    for sub in cmd.get_subcommands() {
        let name = format!("handshake-{}", sub.get_name());
        // The page's own name, so its NAME and SYNOPSIS read `handshake-bench`.
        page(
            name.clone(),
            sub.clone().name(name).version(env!("CARGO_PKG_VERSION")),
        )?;
    }
    for p in written {
        println!("{}", p.display());
    }
    Ok(0)
}
