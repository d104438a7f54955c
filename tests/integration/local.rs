//! The `file:DIR` backend: the same runs as with Redis, on this host only,
//! through the kernel's file locks; no server at all.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::support::expect_within;
use crate::support::process::signal;
use crate::support::rlock::{self, assert_fails, bare, code, output, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;

fn local(dir: &Scratch) -> std::process::Command {
    let mut cmd = bare();
    cmd.arg("--url").arg(format!("file:{}", dir.file("locks")));
    cmd
}

fn job(dir: &Scratch, secs: &str) -> String {
    format!(
        "s=$(date +%s%N); sleep {secs}; echo \"$s $(date +%s%N) ${{RLOCK_FENCE:-0}}\" >> {}",
        dir.file("log")
    )
}

#[test]
fn runs_exclude_each_other_with_increasing_fences_and_no_server() {
    let dir = Scratch::new();
    let runs: Vec<_> = (0..6)
        .map(|_| {
            spawn(
                local(&dir)
                    .args(["run", "x", "--"])
                    .args(sh(&job(&dir, "0.05"))),
            )
        })
        .collect();
    for run in runs {
        let out = run.output_within(rlock::LIMIT);
        assert_eq!(code(&out), 0, "{}", show(&out));
    }
    crate::support::assert_exclusive_with_fences(&dir, "log", 6);
    let mode = std::fs::metadata(dir.file("locks"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "the lock directory is private");
}

#[test]
fn a_taken_lock_gives_the_conflict_status_and_names_the_holder() {
    let dir = Scratch::new();
    let held = dir.file("held");
    let holder = spawn(
        local(&dir)
            .args(["run", "x", "--"])
            .args(sh(&format!("touch {held}; sleep 3"))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        std::path::Path::new(&held).exists()
    });
    let out = output(local(&dir).args(["run", "-n", "x", "--", "true"]));
    let err = assert_fails(&out, 75);
    assert!(err.contains(&format!("pid {}", holder.pid)), "{err}");
    let out = output(local(&dir).args(["run", "-n", "-E", "3", "x", "--", "true"]));
    assert_eq!(code(&out), 3, "{}", show(&out));
    let start = Instant::now();
    let out = output(local(&dir).args(["run", "--wait", "300ms", "x", "--", "true"]));
    assert_fails(&out, 75);
    assert!(start.elapsed() < Duration::from_secs(2));
    let out = output(local(&dir).args(["status", "x"]));
    assert!(stdout(&out).contains("this host only"), "{}", show(&out));
    let out = output(local(&dir).args(["release", "--force", "x"]));
    let err = assert_fails(&out, 2);
    assert!(err.contains("cannot break"), "{err}");
    // The holder dies: the kernel frees the lock at once.
    signal(holder.pid, libc::SIGKILL);
    expect_within(Duration::from_secs(5), "the lock to be free", || {
        code(&output(local(&dir).args(["run", "-n", "x", "--", "true"]))) == 0
    });
}

#[test]
fn shared_holders_overlap_and_a_semaphore_admits_its_limit() {
    let dir = Scratch::new();
    let runs: Vec<_> = (0..3)
        .map(|_| {
            spawn(
                local(&dir)
                    .args(["run", "--shared", "s", "--"])
                    .args(sh(&job(&dir, "0.4"))),
            )
        })
        .collect();
    for run in runs {
        assert_eq!(code(&run.output_within(rlock::LIMIT)), 0);
    }
    let iv = crate::support::fenced_intervals(&dir, "log");
    assert!(iv[0].1 > iv[2].0, "shared holders ran at once: {iv:?}");
    let dir = Scratch::new();
    let runs: Vec<_> = (0..6)
        .map(|_| {
            spawn(
                local(&dir)
                    .args(["run", "--limit", "3", "m", "--"])
                    .args(sh(&job(&dir, "0.3"))),
            )
        })
        .collect();
    for run in runs {
        assert_eq!(code(&run.output_within(rlock::LIMIT)), 0);
    }
    let iv = crate::support::fenced_intervals(&dir, "log");
    let most = iv
        .iter()
        .map(|a| iv.iter().filter(|b| b.0 <= a.0 && a.0 < b.1).count())
        .max()
        .unwrap();
    assert_eq!(
        most, 3,
        "at most and at some point exactly 3 at once: {iv:?}"
    );
}

#[test]
fn several_names_reentry_and_any_name_work() {
    let dir = Scratch::new();
    let runs: Vec<_> = (0..4)
        .map(|i| {
            let names = if i % 2 == 0 { ["a", "b"] } else { ["b", "a"] };
            spawn(
                local(&dir)
                    .arg("run")
                    .args(names)
                    .arg("--")
                    .args(sh(&job(&dir, "0.05"))),
            )
        })
        .collect();
    for run in runs {
        assert_eq!(code(&run.output_within(rlock::LIMIT)), 0);
    }
    let bin = &crate::support::rlock::bin();
    let url = format!("file:{}", dir.file("locks"));
    let out = output(local(&dir).args(["run", "outer", "--"]).args(sh(&format!(
        "{bin} --url {url} run -n outer -- echo re-entered"
    ))));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(stdout(&out).contains("re-entered"));
    for name in ["../escape", "..", "caf\u{e9}", "100%", "a.b"] {
        let out = output(local(&dir).args(["run", name, "--", "true"]));
        assert_eq!(code(&out), 0, "{name}: {}", show(&out));
    }
    assert!(!std::path::Path::new(&dir.file("escape.lock")).exists());
    for entry in std::fs::read_dir(dir.file("locks")).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!file.starts_with('.') && !file.contains('/'), "{file}");
    }
}

#[test]
fn options_without_meaning_here_are_refused_and_a_waiter_can_be_interrupted() {
    let dir = Scratch::new();
    for (args, says) in [
        (&["acquire", "x"][..], "use rlock run"),
        (&["run", "--fair", "x", "--", "true"], "no queue"),
        (
            &["run", "--min-replicas", "1", "x", "--", "true"],
            "--min-replicas",
        ),
    ] {
        let out = output(local(&dir).args(args));
        let err = assert_fails(&out, 2);
        assert!(err.contains(says), "{err}");
    }
    let out = output(
        local(&dir)
            .args(["--url", "redis://127.0.0.1:1"])
            .args(["run", "x", "--", "true"]),
    );
    assert_fails(&out, 2);
    let held = dir.file("held");
    let _holder = spawn(
        local(&dir)
            .args(["run", "i", "--"])
            .args(sh(&format!("touch {held}; sleep 10"))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        std::path::Path::new(&held).exists()
    });
    let waiter = spawn(local(&dir).args(["run", "i", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        std::fs::read_dir(dir.file("locks"))
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().starts_with("i.w."))
    });
    signal(waiter.pid, libc::SIGINT);
    let out = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 130, "{}", show(&out));
    assert!(
        !std::fs::read_dir(dir.file("locks")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("i.w.")),
        "no waiter left"
    );
}

#[test]
fn a_stale_holder_file_is_never_reentered_even_with_a_live_pid() {
    let dir = Scratch::new();
    let held = dir.file("held");
    let _real = spawn(
        local(&dir)
            .args(["run", "x", "--"])
            .args(sh(&format!("touch {held}; sleep 5"))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        std::path::Path::new(&held).exists()
    });
    // What a SIGKILLed holder leaves behind once its pid is reused (pid 1 lives).
    let token = "0123456789abcdef0123456789abcdef";
    std::fs::write(
        format!("{}/x.h.{token}", dir.file("locks")),
        "pid=1\nhost=h\nsince=0\nkind=x\nfence=1\ncommand=gone",
    )
    .unwrap();
    let out = output(
        local(&dir)
            .env("RLOCK_TOKENS", token)
            .args(["run", "-n", "x", "--", "true"]),
    );
    assert_fails(&out, 75);
    // A record half made by a process that died goes with the next hold.
    let half = format!("{}/y.n.{token}", dir.file("locks"));
    std::fs::write(&half, "pid=1").unwrap();
    assert_eq!(
        code(&output(local(&dir).args(["run", "y", "--", "true"]))),
        0
    );
    assert!(!std::path::Path::new(&half).exists());
}

#[test]
fn the_lock_lasts_while_anything_of_command_still_runs() {
    let dir = Scratch::new();
    let bin = &crate::support::rlock::bin();
    let url = format!("file:{}", dir.file("locks"));
    let inner = dir.file("inner");
    // A nested run that leaves COMMAND's group (setsid) outlives the outer run.
    let out = output(local(&dir).args(["run", "a", "--"]).args(sh(&format!(
        "setsid {bin} --url {url} run a -- sh -c 'touch {inner}; sleep 3' >/dev/null 2>&1 & \
         while [ ! -e {inner} ]; do sleep 0.05; done"
    ))));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(local(&dir).args(["run", "-n", "a", "--", "true"]));
    assert_fails(&out, 75);
}

/// A holder of `name` (with `args`) whose COMMAND touches `flag`, then sleeps.
fn holding(dir: &Scratch, args: &[&str], flag: &str) -> crate::support::process::Proc {
    let flag = dir.file(flag);
    let proc = spawn(
        local(dir)
            .arg("run")
            .args(args)
            .arg("--")
            .args(sh(&format!("touch {flag}; sleep 5"))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        std::path::Path::new(&flag).exists()
    });
    proc
}

#[test]
fn kinds_never_mix_and_semaphores_keep_to_the_smallest_limit() {
    let dir = Scratch::new();
    let _reader = holding(&dir, &["--shared", "k"], "r");
    let out = output(local(&dir).args(["run", "-n", "--limit", "2", "k", "--", "true"]));
    assert_fails(&out, 75);
    let dir = Scratch::new();
    let _sem = holding(&dir, &["--limit", "2", "k"], "m");
    let out = output(local(&dir).args(["run", "-n", "--shared", "k", "--", "true"]));
    assert_fails(&out, 75);
    let dir = Scratch::new();
    let _a = holding(&dir, &["--limit", "2", "m"], "a");
    let _b = holding(&dir, &["--limit", "2", "m"], "b");
    // Two holders that each allow 2: a third never gets in, whatever its own N.
    let out = output(local(&dir).args(["run", "-n", "--limit", "3", "m", "--", "true"]));
    assert_fails(&out, 75);
}

/// A run of `args` whose COMMAND touches `flag`, then lasts while `go` exists.
fn holding_until(
    dir: &Scratch,
    args: &[&str],
    flag: &str,
    go: &str,
) -> crate::support::process::Proc {
    let (flag, go) = (dir.file(flag), dir.file(go));
    std::fs::write(&go, "").unwrap();
    let proc = spawn(local(dir).arg("run").args(args).arg("--").args(sh(&format!(
        "touch {flag}; while [ -e {go} ]; do sleep 0.02; done"
    ))));
    expect_within(rlock::LIMIT, "the holder", || {
        std::path::Path::new(&flag).exists()
    });
    proc
}

/// SIGSTOPs `proc` at a moment it does not hold lock `name`'s gate (held
/// while a request decides, for microseconds: one stopped inside that
/// moment keeps every other request of the lock out until it is continued,
/// which is not what the caller tests), continuing and stopping it again
/// until then.
fn stop_outside_gate(dir: &Scratch, name: &str, proc: &crate::support::process::Proc) {
    use std::os::unix::fs::MetadataExt;
    let gate = std::fs::metadata(format!("{}/{name}.gate", dir.file("locks")))
        .expect("the gate, which a waiting request has taken")
        .ino();
    let pid = proc.pid.to_string();
    let stopped = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('T'))
        })
    };
    let holds_gate = || {
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                f.get(4) == Some(&pid.as_str())
                    && f.get(5).is_some_and(|d| d.ends_with(&format!(":{gate}")))
            })
    };
    expect_within(rlock::LIMIT, "the writer stopped outside the gate", || {
        proc.signal(libc::SIGSTOP);
        expect_within(rlock::LIMIT, "the writer to stop", stopped);
        if holds_gate() {
            proc.signal(libc::SIGCONT);
            return false;
        }
        true
    });
}

fn waiting(dir: &Scratch, name: &str) -> String {
    let out = output(local(dir).args(["status", "--json", name]));
    let json = stdout(&out);
    let at = json.find("\"waiting\":").expect("waiting in status");
    json[at + 10..].split([',', '}']).next().unwrap().to_owned()
}

#[test]
fn a_waiting_writer_goes_before_new_readers_and_a_killed_waiter_is_not_counted() {
    let dir = Scratch::new();
    let reader = holding_until(&dir, &["--shared", "w"], "r", "go");
    let writer = spawn(local(&dir).args(["run", "w", "--", "echo", "writer"]));
    expect_within(rlock::LIMIT, "the writer to wait", || {
        waiting(&dir, "w") == "1"
    });
    // Readers would keep the lock shared for ever: a new one waits its turn.
    let out = output(local(&dir).args(["run", "-n", "--shared", "w", "--", "true"]));
    assert_fails(&out, 75);
    std::fs::remove_file(dir.file("go")).unwrap();
    assert_eq!(code(&reader.output_within(rlock::LIMIT)), 0);
    let out = writer.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(stdout(&out).contains("writer"));

    let _reader = holding_until(&dir, &["--shared", "k"], "k", "go-k");
    let mut killed = spawn(local(&dir).args(["run", "k", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter", || waiting(&dir, "k") == "1");
    killed.signal(libc::SIGKILL);
    killed.wait_within(rlock::LIMIT);
    assert_eq!(waiting(&dir, "k"), "0");
    // Nor does it hold back a reader.
    let out = output(local(&dir).args(["run", "-n", "--shared", "k", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    std::fs::remove_file(dir.file("go-k")).unwrap();
}

#[test]
fn long_names_work_and_no_lock_file_is_opened_through_a_symlink_or_in_an_open_dir() {
    let dir = Scratch::new();
    let names = [
        "%".repeat(200),
        format!("{}&", "%".repeat(199)),
        "\u{e9}".repeat(100),
    ];
    for (i, name) in names.iter().enumerate() {
        let _holder = holding_until(&dir, &[name], &format!("h{i}"), "go");
        let out = output(local(&dir).args(["list", "--json"]));
        assert!(stdout(&out).contains(name.as_str()), "{}", show(&out));
        assert_fails(
            &output(local(&dir).args(["run", "-n", name, "--", "true"])),
            75,
        );
        std::fs::remove_file(dir.file("go")).unwrap();
    }
    let outside = dir.file("outside");
    std::os::unix::fs::symlink(&outside, format!("{}/s.lock", dir.file("locks"))).unwrap();
    let out = output(local(&dir).args(["run", "s", "--", "echo", "ran"]));
    assert_fails(&out, 69);
    assert!(!std::path::Path::new(&outside).exists());
    // A directory where others may remove lock files from under their holders.
    let open_dir = dir.file("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let url = format!("file:{open_dir}");
    let err = assert_fails(
        &output(bare().args(["--url", &url, "run", "x", "--", "true"])),
        2,
    );
    assert!(err.contains("sticky"), "{err}");
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(
        code(&output(
            bare().args(["--url", &url, "run", "x", "--", "true"])
        )),
        0
    );
}

#[test]
fn a_stopped_writer_does_not_hold_readers_back_for_ever() {
    let dir = Scratch::new();
    let _reader = holding_until(&dir, &["--shared", "s"], "r", "go");
    let writer = spawn(local(&dir).args(["run", "s", "--", "true"]));
    expect_within(rlock::LIMIT, "the writer to wait", || {
        waiting(&dir, "s") == "1"
    });
    stop_outside_gate(&dir, "s", &writer);
    assert_fails(
        &output(local(&dir).args(["run", "-n", "--shared", "s", "--", "true"])),
        75,
    );
    // Once its record has not been marked for a while (2 s), readers go on.
    expect_within(rlock::LIMIT, "a reader to get in", || {
        code(&output(
            local(&dir).args(["run", "-n", "--shared", "s", "--", "true"]),
        )) == 0
    });
    writer.signal(libc::SIGCONT);
    std::fs::remove_file(dir.file("go")).unwrap();
    assert_eq!(code(&writer.output_within(rlock::LIMIT)), 0);
}

/// A filesystem that refuses (full, read-only) is the lock's place being
/// unavailable: exit 69 whether DIR exists or must be created, one line, and no
/// temporary file left in DIR. A DIR that is not a directory is a usage error.
/// Runs in a private mount namespace with a small tmpfs (root, or a user
/// namespace mapping the caller to root), so nothing outside the test sees it.
#[test]
fn a_full_or_read_only_filesystem_exits_69_and_leaves_no_temporary_file() {
    let dir = Scratch::new();
    let mnt = dir.file("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let script = format!(
        r#"set -u
        rl() {{ "$RLOCK" --url "file:$1" run "$2" -- true 2>"$M.err"; echo "$? $(tr '\n' '|' <"$M.err")"; }}
        M={mnt}
        mount -t tmpfs -o size=64k tmpfs "$M" || exit 99
        mkdir -m 700 "$M/locks"
        head -c 10000000 /dev/zero >"$M/fill" 2>/dev/null
        echo "full: $(rl "$M/locks" x)"
        echo "left: $(ls "$M/locks" | grep -v -e '\.lock$' -e '\.gate$' | tr '\n' ' ')"
        rm "$M/fill"
        echo "room: $(rl "$M/locks" x)"
        mount -o remount,ro "$M"
        echo "ro: $(rl "$M/locks" y)"
        echo "ro-missing: $(rl "$M/missing" y)"
        echo "not-a-dir: $(rl "$M/locks/x.lock" y)"
        "#
    );
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = std::process::Command::new("unshare");
    if !root {
        cmd.arg("--map-root-user");
    }
    let out = output(
        cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("RLOCK", rlock::bin()),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    let line = |what: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{what}: ")))
            .unwrap_or_else(|| panic!("no {what} in {text}"))
            .to_owned()
    };
    let one_line = |l: &str| l.matches("|rlock:").count() == 0 && l.matches("rlock:").count() == 1;
    let full = line("full");
    assert!(
        full.starts_with("69 ") && full.contains("No space left"),
        "{full}"
    );
    assert!(one_line(&full), "{full}");
    assert_eq!(line("left").trim(), "", "temporary files left in DIR");
    assert!(line("room").starts_with("0 "), "{text}");
    for what in ["ro", "ro-missing"] {
        let l = line(what);
        assert!(
            l.starts_with("69 ") && l.contains("Read-only"),
            "{what}: {l}"
        );
        assert!(one_line(&l), "{l}");
    }
    let l = line("not-a-dir");
    assert!(l.starts_with("2 ") && l.contains("not a directory"), "{l}");
}

/// `file:DIR` locks are flock(2) locks on `DIR/NAME.lock`: flock(1) on the same
/// file and rlock exclude each other (shared with shared allowed), so jobs can
/// move from flock to rlock one at a time.
#[test]
fn file_locks_interoperate_with_flock() {
    let dir = Scratch::new();
    let url = format!("file:{}", dir.file("locks"));
    let lock_file = dir.file("locks/fx.lock");
    // rlock holds: flock cannot, exclusive or shared.
    let out = output(
        bare()
            .args(["--url", &url, "run", "fx", "--"])
            .args(sh(&format!(
        "flock -n {lock_file} true; echo \"x $?\"; flock -n -s {lock_file} true; echo \"s $?\""
    ))),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(stdout(&out), "x 1\ns 1\n");
    // flock holds: rlock finds it taken.
    let out = output(
        std::process::Command::new("flock")
            .arg(&lock_file)
            .arg(rlock::bin())
            .args(["--url", &url, "run", "--no-wait", "fx", "--", "true"]),
    );
    assert_eq!(code(&out), 75, "{}", show(&out));
    // Shared beside shared.
    let out = output(
        bare()
            .args(["--url", &url, "run", "--shared", "fx", "--"])
            .args(sh(&format!("flock -n -s {lock_file} true; echo \"s $?\""))),
    );
    assert_eq!(stdout(&out), "s 0\n", "{}", show(&out));
}
