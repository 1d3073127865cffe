//! The Files group reaches only the directory the host names (`RpcPolicy::with_files(dir)`): the
//! host's memory (`/proc/self/mem`), absolute paths, `..` above the directory, symlinks that lead
//! out of it and magic links are refused for `fopen`, `remove` and `rename`, counted and logged;
//! files inside work (`fopen`, `fread`, `fwrite`, `remove`, `rename`).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hostcall::{
    services::printf::Streams,
    services::rpc::client::one_lane::{fopen, one_packet, read, strings},
    services::rpc::{RpcHost, RpcLimits, RpcPolicy},
};
use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{Client, Header, LaneBuffer, Parts, View};
use hostcall_core::sync::AtomicU32;
use hostcall_core::ServiceTable;

const EOF: u64 = -1i64 as u64;

fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < Duration::from_secs(20)
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hostcall-confined-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `device` as the client of a one-port, one-lane buffer served by `host` until it returns.
fn serve<T: Send>(host: &mut RpcHost, device: impl FnOnce(&Client<'_>) -> T + Send) -> T {
    let words = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
    let (a, b, locks) = (words(1), words(1), words(1));
    let (headers, buffers) = (vec![Header::default()], vec![LaneBuffer::default()]);
    let parts =
        Parts { lanes: 1, host_mailbox: &a, device_mailbox: &b, headers: &headers, buffers: &buffers };
    let view = View::from_parts(parts).unwrap();
    let client = Client::new(view, &locks).unwrap();
    let mut sink = Streams { stdout: Vec::new(), stderr: Vec::new() };
    let services = ServiceTable::<1>::new();
    std::thread::scope(|s| {
        let device = s.spawn(|| device(&client));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !device.is_finished() {
            assert!(Instant::now() < deadline, "the device's calls did not finish (a hang)");
            host.drain(&view, &mut sink, &services);
        }
        device.join().unwrap()
    })
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn paths_that_leave_the_directory_are_refused_counted_and_logged() {
    common::logs::install();
    let root = fresh_dir("root");
    let outside = fresh_dir("outside");
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("out")).unwrap(); // absolute, leads out
    let relative_out = format!("../{}/secret.txt", outside.file_name().unwrap().to_str().unwrap());
    std::os::unix::fs::symlink(&relative_out, root.join("sub_out")).unwrap(); // relative, leads out
    let absolute_secret = secret.to_str().unwrap().as_bytes().to_vec();

    let mut host = RpcHost::new(1, RpcPolicy::default().with_files(&root), RpcLimits::default());
    let up = relative_out.clone().into_bytes();
    let answers = serve(&mut host, |client| {
        let w = &mut patience();
        let mut open = |path: &[u8], mode: &[u8]| fopen(client, 0, path, mode, &mut *w).unwrap();
        let opened = [
            open(b"/proc/self/mem", b"r+"),
            open(&absolute_secret, b"r"),
            open(&up, b"r"),
            open(b"out/secret.txt", b"r"),
            open(b"sub_out", b"r"),
            open(b"sub/../../escape.txt", b"w"),
            open(b"out/created.txt", b"w"),
        ];
        let w = &mut patience();
        let mut call = |opcode, paths: &[&[u8]]| strings(client, 0, opcode, paths, 0, &mut *w).unwrap();
        let changed = [
            call(libc::REMOVE, &[&up]),
            call(libc::REMOVE, &[b"out/secret.txt"]),
            call(libc::REMOVE, &[&absolute_secret]),
            call(libc::REMOVE, &[b"sub/.."]),
            call(libc::RENAME, &[&up, b"stolen.txt"]),
            call(libc::RENAME, &[b"sub", b"out/sub"]),
            call(libc::RENAME, &[b"sub", &absolute_secret]),
        ];
        (opened, changed)
    });
    assert_eq!(answers.0, [0; 7], "every fopen refused: a null FILE");
    assert_eq!(answers.1, [EOF; 7], "every remove and rename refused: -1");
    assert_eq!(text(&secret), "secret", "the file outside is untouched");
    assert!(!outside.join("created.txt").exists() && !outside.join("sub").exists());
    assert!(!root.join("stolen.txt").exists() && root.join("sub").is_dir());
    assert!(!root.parent().unwrap().join("escape.txt").exists());
    assert_eq!(host.counters().refused_lanes, 14, "each refusal counted");
    let logged = common::logs::lines()
        .iter()
        .filter(|line| line.contains("refused: outside the files directory"))
        .count();
    assert!(logged >= 10, "each refusal logged (rate-limited: 10 a window): {logged}");
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::remove_dir_all(&outside).unwrap();
}

#[test]
fn magic_links_are_refused_even_beneath_the_directory() {
    // A host that names /proc/self: its `cwd` and `fd/*` entries are magic links, refused.
    let mut host = RpcHost::new(1, RpcPolicy::default().with_files("/proc/self"), RpcLimits::default());
    let opened = serve(&mut host, |client| {
        let w = &mut patience();
        [fopen(client, 0, b"cwd/Cargo.toml", b"r", w).unwrap(), fopen(client, 0, b"fd/0", b"r", w).unwrap()]
    });
    assert_eq!(opened, [0, 0]);
    assert_eq!(host.counters().refused_lanes, 2);
}

#[test]
fn files_inside_the_directory_work() {
    let root = fresh_dir("inside");
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("sub/b.txt", root.join("link")).unwrap(); // stays inside
    let mut host = RpcHost::new(1, RpcPolicy::default().with_files(&root), RpcLimits::default());
    let answers = serve(&mut host, |client| {
        let w = &mut patience();
        let file = fopen(client, 0, b"sub/a.txt", b"w+", w).unwrap();
        let mut port = client.try_open(libc::WRITE_TO_STREAM, 1, 0).unwrap();
        port.send(|_| [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        port.send_n(|_| b"inside\n", w).unwrap();
        let mut written = 0;
        port.recv(|_, words| written = words[0], w).unwrap();
        port.close();
        let rewound = one_packet(client, 0, libc::FSEEK, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let back = read(client, 0, libc::READ_FROM_STREAM, 64, file, w).unwrap();
        let closed = one_packet(client, 0, libc::CLOSE_FILE, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let renamed = strings(client, 0, libc::RENAME, &[b"sub/a.txt", b"./sub/b.txt"], 0, w).unwrap();
        let through_link = fopen(client, 0, b"link", b"r", w).unwrap();
        let line = read(client, 0, libc::READ_FGETS, 64, through_link, w).unwrap();
        one_packet(client, 0, libc::CLOSE_FILE, [through_link, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let exclusive = fopen(client, 0, b"sub/b.txt", b"wx", w).unwrap();
        let removed = strings(client, 0, libc::REMOVE, &[b"sub/b.txt"], 0, w).unwrap();
        let missing = fopen(client, 0, b"sub/b.txt", b"r", w).unwrap();
        let removed_dir = strings(client, 0, libc::REMOVE, &[b"sub/"], 0, w).unwrap();
        (file & 3, written, rewound, back, closed, renamed, line, exclusive, removed, missing, removed_dir)
    });
    let (tag, written, rewound, back, closed, renamed, line, exclusive, removed, missing, removed_dir) =
        answers;
    assert_eq!((tag, written, rewound, closed, renamed), (0, 7, 0, 0, 0));
    assert_eq!(back, (b"inside\n".to_vec(), Some(7)));
    assert_eq!(line, (b"inside\n\0".to_vec(), None), "a symlink that stays inside is followed");
    assert_eq!(exclusive, 0, "\"wx\" on an existing file fails, as in C");
    assert_eq!((removed, missing, removed_dir), (0, 0, 0), "remove, then fopen of it fails; rmdir");
    assert!(std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name()).eq(["link"]));
    assert_eq!(host.counters().refused_lanes, 0, "nothing refused");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_directory_that_does_not_open_refuses_every_file_call() {
    let gone = std::env::temp_dir().join(format!("hostcall-confined-none-{}", std::process::id()));
    let mut host = RpcHost::new(1, RpcPolicy::default().with_files(&gone), RpcLimits::default());
    let answers = serve(&mut host, |client| {
        let w = &mut patience();
        (
            fopen(client, 0, b"a.txt", b"w", w).unwrap(),
            strings(client, 0, libc::REMOVE, &[b"a.txt"], 0, w).unwrap(),
        )
    });
    assert_eq!(answers, (0, EOF));
    assert_eq!(host.counters().refused_lanes, 2);
}
