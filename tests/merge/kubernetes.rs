//! The container image and the Kubernetes Job that run handshake as N agents.
//!
//! - `deploy/kubernetes/job.yaml` is an Indexed `batch/v1` Job whose `--segments`
//!   equals its `completions` and `parallelism`, whose container runs
//!   `bench ... --segments N --start-at $(START_AT) --json` with `START_AT` set, an
//!   image, and `restartPolicy: Never`.
//! - The `Dockerfile` builds with `cargo build --release --locked`, copies the binary to
//!   `/usr/local/bin/handshake` in its runtime stage and has `ENTRYPOINT ["handshake"]`;
//!   `.dockerignore` keeps `target/` out of the build context.
//! - Where `kubectl` is on PATH, kubectl itself parses the manifests (no cluster
//!   needed); skipped with a message otherwise.
//!
//! None of this builds an image or runs on a cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    let path = repo_file(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load_job() -> Yaml {
    let docs = YamlLoader::load_from_str(&read("deploy/kubernetes/job.yaml"))
        .expect("job.yaml is valid YAML");
    assert_eq!(docs.len(), 1, "job.yaml holds one document");
    docs.into_iter().next().unwrap()
}

#[test]
fn job_is_indexed_and_its_segments_equal_its_completions() {
    let _machine = crate::common::shared();
    let doc = load_job();
    assert_eq!(doc["apiVersion"].as_str(), Some("batch/v1"));
    assert_eq!(doc["kind"].as_str(), Some("Job"));
    assert_eq!(doc["metadata"]["name"].as_str(), Some("handshake-load"));

    let spec = &doc["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let completions = spec["completions"]
        .as_i64()
        .expect("completions is a number");
    assert!(completions >= 1, "completions {completions}");
    assert_eq!(
        spec["parallelism"].as_i64(),
        Some(completions),
        "parallelism must equal completions, so every agent runs at once",
    );

    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let containers = pod["containers"].as_vec().expect("containers is a list");
    assert_eq!(containers.len(), 1, "one container");
    let container = &containers[0];
    let image = container["image"].as_str().expect("image is set");
    assert!(!image.trim().is_empty(), "image is set");
    assert!(
        container["command"].is_badvalue(),
        "args, not command: the image's entrypoint is handshake",
    );

    let args: Vec<&str> = container["args"]
        .as_vec()
        .expect("args is a list")
        .iter()
        .map(|a| a.as_str().expect("every arg is a string"))
        .collect();
    assert_eq!(args.first(), Some(&"bench"), "{args:?}");
    let segments = args
        .iter()
        .position(|a| *a == "--segments")
        .unwrap_or_else(|| panic!("--segments in {args:?}"));
    assert_eq!(
        args.get(segments + 1).copied(),
        Some(completions.to_string().as_str()),
        "--segments N must equal completions: {args:?}",
    );
    assert!(args.contains(&"--json"), "{args:?}");
    let start_at = args
        .iter()
        .position(|a| *a == "--start-at")
        .unwrap_or_else(|| panic!("--start-at in {args:?}"));
    assert_eq!(args.get(start_at + 1).copied(), Some("$(START_AT)"));

    // $(START_AT) is expanded by Kubernetes only if the variable is defined.
    let env = container["env"].as_vec().expect("env is a list");
    let start = env
        .iter()
        .find(|e| e["name"].as_str() == Some("START_AT"))
        .expect("START_AT is set in env");
    assert!(start["value"].as_str().is_some_and(|v| !v.is_empty()));
}

#[test]
fn dockerfile_builds_locked_and_runs_handshake() {
    let _machine = crate::common::shared();
    let dockerfile = read("Dockerfile");
    // Instructions only: comments and blank lines dropped, continuations kept as lines.
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.to_ascii_uppercase().starts_with("FROM "))
        .map(|(i, _)| i)
        .collect();
    assert!(froms.len() >= 2, "a multi-stage build: {froms:?}");
    let builder = &lines[froms[0]..froms[froms.len() - 1]];
    let runtime = &lines[froms[froms.len() - 1]..];

    assert!(
        builder
            .iter()
            .any(|l| l.starts_with("RUN ") && l.contains("cargo build --release --locked")),
        "the builder runs cargo build --release --locked: {builder:?}",
    );
    assert!(
        runtime.iter().any(|l| l.starts_with("COPY --from=")
            && l.ends_with(" /usr/local/bin/handshake")
            && l.contains("target/release/handshake")),
        "the runtime stage copies the binary to /usr/local/bin/handshake: {runtime:?}",
    );
    let entrypoints: Vec<&str> = runtime
        .iter()
        .copied()
        .filter(|l| l.starts_with("ENTRYPOINT"))
        .collect();
    assert_eq!(entrypoints, [r#"ENTRYPOINT ["handshake"]"#], "{runtime:?}");

    let ignore = read(".dockerignore");
    assert!(
        ignore
            .lines()
            .map(str::trim)
            .any(|l| matches!(l, "target" | "target/" | "/target" | "/target/")),
        ".dockerignore excludes target/: {ignore}",
    );
}

/// `name` in one of PATH's directories, as `which` finds it.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[test]
fn kubectl_parses_the_manifests() {
    let _machine = crate::common::shared();
    let Some(kubectl) = on_path("kubectl") else {
        eprintln!("skipping: kubectl is not on PATH");
        return;
    };
    // `kubectl create --dry-run=client -f` asks the API server for its resource list
    // (and fails without a cluster); `label --local` decodes the same files without one.
    let out = Command::new(kubectl)
        .args(["label", "--local", "--dry-run=client", "-o", "name", "-f"])
        .arg(repo_file("deploy/kubernetes"))
        .arg("checked=true")
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.trim() == "job.batch/handshake-load"),
        "{stdout}",
    );
}
