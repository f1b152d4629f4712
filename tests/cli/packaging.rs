//! `handshake completions SHELL` and `handshake man`: a real bash completes the commands
//! and flags from the script, and man renders the pages.

use crate::common;
use std::process::Command;

use crate::common::*;

/// Ask bash's completion, as a user pressing Tab after `line` would, with the script
/// `handshake completions bash` printed loaded.
fn bash_complete(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let line = words.join(" ");
    let prog = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n_handshake handshake '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash")
        .args(["-c", &prog])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completes_commands_and_flags_from_the_script() {
    let _machine = shared();
    let out = run(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    let script = TempFile::new("handshake.bash", &out.stdout);
    let got = bash_complete(&script.0, &["handshake", "co"]);
    assert!(
        got.contains(&"compare".to_string()) && got.contains(&"completions".to_string()),
        "{got:?}"
    );
    assert!(!got.contains(&"bench".to_string()), "{got:?}");
    let got = bash_complete(&script.0, &["handshake", "bench", "--fail"]);
    assert_eq!(got, ["--fail-if"], "{got:?}");
    let got = bash_complete(&script.0, &["handshake", "completions", "z"]);
    assert_eq!(got, ["zsh"], "{got:?}");

    for (shell, says) in [
        ("zsh", "#compdef handshake"),
        ("fish", "complete -c handshake"),
        ("elvish", "handshake"),
        ("powershell", "handshake"),
    ] {
        let out = run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(says) && text.contains("fail-if"), "{shell}");
    }
    let out = run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tcsh"));
}

#[test]
fn man_pages_render() {
    let _machine = shared();
    let out = run(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(page.contains(".TH handshake 1"), "{page:.200}");
    for says in ["bench", "compare", "audit", "completions"] {
        assert!(page.contains(says), "{says} in the main page");
    }

    /// The pages' directory, removed also when an assertion fails.
    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let guard = Dir(std::env::temp_dir().join(format!("handshake-man-{}", std::process::id())));
    let dir = &guard.0;
    let out = run(&["man", "--out", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in [
        "handshake.1",
        "handshake-bench.1",
        "handshake-audit.1",
        "handshake-man.1",
    ] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
        assert!(listed.contains(n), "{listed}");
    }
    let bench = std::fs::read_to_string(dir.join("handshake-bench.1")).unwrap();
    let th = format!(
        ".TH handshake-bench 1  \"handshake-bench {}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(bench.contains(&th), "{th} in {bench:.300}");
    assert!(bench.contains("fail\\-if"), "the flags are in it");
    // Rendered by man itself where the machine has it.
    if have("man") {
        let out = Command::new("man")
            .args(["-l", dir.join("handshake-bench.1").to_str().unwrap()])
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("--fail-if") && text.contains("handshake-bench"),
            "{text:.500}"
        );
    }
}

/// `handshake man | head`, `handshake completions bash | grep -q ...`: a reader that stops
/// early is no error. The output goes into a pipe whose reading end is already closed, so
/// every write fails with EPIPE.
#[test]
fn output_into_a_closed_pipe_exits_quietly() {
    let _machine = shared();
    use std::os::fd::FromRawFd;
    for args in [vec!["man"], vec!["completions", "bash"]] {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        unsafe { libc::close(fds[0]) };
        let write = unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) };
        let out = std::process::Command::new(common::bin())
            .args(&args)
            .stdout(std::process::Stdio::from(write))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The same for a command that measures (audit, its report into a closed pipe): no
/// panic, and its own exit status (0: the client ran and reused its connection).
#[test]
fn a_report_into_a_closed_pipe_is_no_panic() {
    let _machine = shared();
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    unsafe { libc::close(fds[0]) };
    let write = unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) };
    let out = std::process::Command::new(common::bin())
        .args([
            "audit",
            "--",
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "{url}",
            "{url}",
        ])
        .stdout(std::process::Stdio::from(write))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// docs/commands holds a page per command whose options are generated from the
/// command-line definitions (`handshake man --markdown docs/commands`): regenerated
/// into a copy, every page is unchanged (the docs are current), every command has one,
/// and each lists every option its `--help` names.
#[test]
fn docs_commands_pages_are_generated_and_current() {
    let _machine = shared();
    let docs = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands"));
    let guard = Dir(std::env::temp_dir().join(format!("handshake-docs-{}", std::process::id())));
    let copy = &guard.0;
    std::fs::create_dir_all(copy).unwrap();
    for e in std::fs::read_dir(docs).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
    }
    let out = run(&["man", "--markdown", copy.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = String::from_utf8_lossy(&out.stdout);
    assert_eq!(written.lines().count(), 11, "a page per command: {written}");
    for e in std::fs::read_dir(copy).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        let now = std::fs::read_to_string(&p).unwrap();
        let committed = std::fs::read_to_string(docs.join(&name))
            .unwrap_or_else(|_| panic!("docs/commands/{name} is missing"));
        assert!(
            now == committed,
            "docs/commands/{name} is not current: run `handshake man --markdown docs/commands`"
        );
        let command = name.trim_end_matches(".md");
        let help = String::from_utf8(run(&[command, "--help"]).stdout).unwrap();
        // Its options, not the exit status text after them.
        let options = help.split("\nExit status:").next().unwrap();
        for flag in options
            .split_whitespace()
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.trim_end_matches([',', '.', ')', ';', ':']))
            .filter(|w| {
                w.chars()
                    .skip(2)
                    .all(|c| c.is_ascii_lowercase() || c == '-')
            })
            .filter(|w| *w != "--help" && *w != "--version")
        {
            // Each of the command's own options has its line; a flag named inside
            // another's help (for example `--max-idle 65s`) is in the page too.
            assert!(
                now.contains(flag),
                "docs/commands/{name} does not name {flag}"
            );
        }
    }
}
