//! The built program's own test: its exit codes, its summary, and an interrupted run.

use crate::cli;
use std::process::Command as Process;

/// The built example itself: `--help` on stdout with exit 0, a bad flag with exit 2, and the
/// inputs that must not panic. `cargo test` builds examples only as test harnesses, so the
/// program must be built first; `./run-tests` does, then runs this test with `--ignored`. A
/// program missing or older than its sources fails the test.
#[test]
#[ignore = "needs the built program: cargo build -p hostcall --example waves, then cargo test -p hostcall --example waves -- --ignored (./run-tests does)"]
fn the_binary_exits_as_documented() {
    let exe =
        std::env::current_exe().unwrap().with_file_name(format!("waves{}", std::env::consts::EXE_SUFFIX));
    let modified = |path: &std::path::Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let sources: Vec<_> = ["waves", "cli"]
        .iter()
        .flat_map(|folder| std::fs::read_dir(examples.join(folder)).unwrap())
        .map(|entry| modified(&entry.unwrap().path()))
        .collect();
    let built = modified(&exe);
    assert!(
        built.is_some_and(|built| sources.iter().all(|&source| source.is_some_and(|s| s <= built))),
        "{} is missing or older than its sources: cargo build -p hostcall --example waves",
        exe.display()
    );
    let run = |args: &[&str]| bounded(Process::new(&exe).args(args));
    let pools = listener_pools();
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).starts_with("usage: waves"));
    let bad = run(&["--bogus"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("'--bogus'"));
    for args in [
        &["--calls", "0"][..],
        &["--waves", "2", "--lanes", "2", "--calls", "3", "--printf", "1"],
        &["--waves", "6", "--lanes", "4", "--calls", "30", "--packets", "2", "--protocol", "phase"],
        &["--waves", "6", "--lanes", "4", "--calls", "30", "--packets", "2"],
        &[
            "--waves",
            "6",
            "--lanes",
            "4",
            "--calls",
            "30",
            "--packets",
            "2",
            "--protocol",
            "rpc",
            "--printf",
            "5",
        ],
    ]
    .into_iter()
    .chain(pools.iter().map(Vec::as_slice))
    {
        let out = run(&[args, &["--host-memory"][..]].concat());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("summary:") && stdout.contains("errors=0"), "{args:?}: {stdout}");
    }
    for threads in ["0", "65", "1,2"] {
        let bad = run(&["--threads", threads, "--host-memory"]);
        assert_eq!(bad.status.code(), Some(2), "--threads {threads}");
        assert!(String::from_utf8_lossy(&bad.stderr).contains("--threads: "), "the flag named");
    }
    assert!(String::from_utf8_lossy(&run(&["--threads", "65"]).stderr).contains("1..=64"), "the limit named");
    a_scaling_run_prints_its_table(&run);
    let rpc = run(&["--protocol", "rpc", "--packets", "5000", "--host-memory"]);
    assert_eq!(rpc.status.code(), Some(2), "a geometry outside the protocol's limits is a usage error");
    assert!(String::from_utf8_lossy(&rpc.stderr).contains("4096"), "the limit named");
    let help_text = String::from_utf8_lossy(&help.stdout);
    for code in ["0", "1", "2", "130"] {
        assert!(help_text.contains(&format!(" {code} ")), "--help names exit code {code}");
    }
    a_closed_stdout_ends_the_run_quietly(&exe);
    interrupted_runs_show_progress_and_a_partial_summary(&exe);
}

/// Runs `command` to its end, its output captured; fails the test (the process killed) if it
/// has not ended within [`RUN_WITHIN`].
fn bounded(command: &mut Process) -> std::process::Output {
    let child =
        command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(RUN_WITHIN) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            #[cfg(unix)]
            // SAFETY: `kill` has no memory-safety precondition; the pid is our child's, still
            // running (its waiting thread has not sent its output).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            panic!("{command:?} did not end within {RUN_WITHIN:?}");
        }
    }
}

/// The bound of one run of the program in these tests.
const RUN_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs served by a pool of 2 and of 4 listener threads for every protocol (the stack's buffers
/// one per thread, the others' one buffer striped, 40 packets: stripes of 32 or 16), a stack
/// buffer whole to one of 2 threads, and LLVM-RPC printfs on ports split over threads and over
/// buffers.
fn listener_pools() -> Vec<Vec<&'static str>> {
    let mut runs = Vec::new();
    for threads in ["2", "4"] {
        for protocol in ["stack", "phase", "line", "rpc"] {
            runs.push(vec![
                "--waves",
                "40",
                "--lanes",
                "4",
                "--calls",
                "30",
                "--threads",
                threads,
                "--protocol",
                protocol,
            ]);
        }
    }
    runs.push(vec!["--waves", "6", "--lanes", "4", "--calls", "30", "--threads", "2", "--buffers", "one"]);
    for buffers in ["one", "per-thread"] {
        runs.push(vec![
            "--waves",
            "8",
            "--lanes",
            "4",
            "--calls",
            "20",
            "--printf",
            "3",
            "--threads",
            "2",
            "--protocol",
            "rpc",
            "--packets",
            "40",
            "--buffers",
            buffers,
        ]);
    }
    runs
}

/// `--scaling` once over two thread counts: a row per setup (7) and thread count, each with a
/// rate, the first thread count's ratio 1, exit 0.
fn a_scaling_run_prints_its_table(run: &dyn Fn(&[&str]) -> std::process::Output) {
    let args =
        ["--scaling", "--threads", "1,2", "--rounds", "1", "--waves", "4", "--lanes", "2", "--calls", "5"];
    let out = run(&[&args[..], &["--host-memory"]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Vec<&str>> = stdout.lines().skip(2).map(|line| line.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 14, "{stdout}");
    for row in &rows {
        assert!(row[3].parse::<f64>().is_ok_and(|rate| rate > 0.0), "a rate: {row:?}");
        assert!(row[2] != "1" || row[4] == "1.000", "the ratio of threads=1 to itself: {row:?}");
    }
    assert!(rows.iter().any(|row| row[..3] == ["rpc", "per-thread", "2"]), "{stdout}");
}

/// `waves | head -1`: the reader leaves before the summary; no panic, exit 0 or SIGPIPE's (as
/// `cat`), within a bound.
#[cfg(unix)]
fn a_closed_stdout_ends_the_run_quietly(exe: &std::path::Path) {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Process::new(exe)
        .args(["--waves", "2", "--lanes", "2", "--calls", "200", "--host-memory"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before the summary line
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("waves did not exit within 60 s with a closed stdout");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.status.code() == Some(0) || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
}

#[cfg(not(unix))]
fn a_closed_stdout_ends_the_run_quietly(_: &std::path::Path) {}

/// The run, `--progress`, sent SIGINT after 2.5 s: progress lines on stderr, the
/// partial summary and the counters on stdout, exit 130.
#[cfg(unix)]
fn interrupted_runs_show_progress_and_a_partial_summary(exe: &std::path::Path) {
    let args = ["--waves", "16", "--lanes", "64", "--calls", "20000", "--host-memory", "--progress"];
    let child = Process::new(exe)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(i32::from(cli::progress::INTERRUPTED_EXIT)), "{stdout}\n{stderr}");
    assert!(stderr.contains("progress: ") && stderr.contains("calls/s"), "{stderr}");
    assert!(stdout.contains("summary (interrupted): calls="), "{stdout}");
    assert!(stdout.contains("refusals:") && stdout.contains("errors=0"), "{stdout}");
}

#[cfg(not(unix))]
fn interrupted_runs_show_progress_and_a_partial_summary(_: &std::path::Path) {}
