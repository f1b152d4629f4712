//! Open-file limits: a load run and a server hold a descriptor per connection, and the
//! usual soft limit (1,024) or a container's hard limit would otherwise be what a run at
//! thousands of connections measures.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The descriptors a run of `connections` may hold at once, with room for the rest of
/// the process (the runtime, the resolver, the report).
pub(crate) fn needed(connections: u64) -> u64 {
    connections.saturating_add(256)
}

/// Raise this process's soft limit on open descriptors to at least `n`: within the hard
/// limit, and past it when the process may raise that too (as root, up to the kernel's
/// `fs.nr_open`). Never lowers either. `Err` with the soft limit it stays at when that
/// is short of `n`.
pub(crate) fn reserve(n: u64) -> Result<(), u64> {
    let lim = getrlimit(Resource::Nofile);
    // `None`: no limit.
    let Some(soft) = lim.current else {
        return Ok(());
    };
    if soft >= n {
        return Ok(());
    }
    let hard = match lim.maximum {
        Some(hard) if hard < n => {
            let raised = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(n),
                    maximum: Some(n),
                },
            );
            if raised.is_ok() {
                return Ok(());
            }
            Some(hard)
        }
        other => other,
    };
    let to = hard.map_or(n, |h| n.min(h));
    let set = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(to),
            maximum: hard,
        },
    );
    let now = if set.is_ok() { to } else { soft };
    if now >= n {
        Ok(())
    } else {
        Err(now)
    }
}

/// A server's limit: its soft limit raised to its hard limit (as Go's runtime and
/// nginx's `worker_rlimit_nofile` do), so it holds as many connections as it may.
pub(crate) fn raise_to_hard() {
    let lim = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (lim.current, lim.maximum) {
        if soft < hard {
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(hard),
                    maximum: Some(hard),
                },
            );
        }
    }
}

/// The soft limit now (`None`: unlimited).
#[cfg(test)]
fn limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    /// A limit already high enough is left as it is; one within the hard limit is raised.
    #[test]
    fn raises_within_the_hard_limit() {
        let before = super::limit();
        assert_eq!(super::reserve(16), Ok(()));
        assert_eq!(super::limit(), before, "never lowered");
        if let Some(soft) = before {
            let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
            if hard.is_none_or(|h| h > soft) {
                let want = hard.map_or(soft + 1, |h| h.min(soft + 1));
                assert_eq!(super::reserve(want), Ok(()));
                assert!(super::limit().is_none_or(|l| l >= want));
            }
        }
    }
}
