use super::*;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quiclab-outputs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_directory_of_someone_elses_files_is_refused_and_left_alone() {
    let d = scratch("foreign");
    std::fs::write(d.join("cert.pem"), "the user's own").unwrap();
    let e = claim_dir(&d, "--keep").unwrap_err().to_string();
    assert!(
        e.starts_with("--keep ") && e.contains("did not create"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("cert.pem")).unwrap(),
        "the user's own"
    );
    assert!(!d.join(MARKER).exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_file_named_like_quiclabs_does_not_make_a_directory_quiclabs() {
    let d = scratch("lookalike");
    for name in ["results.sqlite", "verdicts.json"] {
        let u = d.join(name.replace('.', "-"));
        std::fs::create_dir(&u).unwrap();
        std::fs::write(u.join(name), "the user's own").unwrap();
        assert!(claim_dir(&u, "--out").is_err(), "{name}");
        assert!(!is_claimed(&u));
    }
    // Nor does a file named like the marker without quiclab's text.
    let fake = d.join("fake");
    std::fs::create_dir(&fake).unwrap();
    std::fs::write(fake.join(MARKER), "mine").unwrap();
    std::fs::write(fake.join("notes.txt"), "mine").unwrap();
    assert!(claim_dir(&fake, "--out").is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn new_empty_and_own_directories_are_claimed_and_marked() {
    let d = scratch("own");
    let new = d.join("a/b");
    let (_, created) = claim(&new, "--keep").unwrap();
    assert!(created);
    assert!(new.join(MARKER).is_file());
    std::fs::write(new.join("link.log"), "x").unwrap();
    // A second run into the same directory: it is quiclab's.
    let (_, created) = claim(&new, "--keep").unwrap();
    assert!(!created);
    let empty = d.join("empty");
    std::fs::create_dir(&empty).unwrap();
    claim_dir(&empty, "--out").unwrap();
    assert!(empty.join(MARKER).is_file());
    // A file is not a directory.
    std::fs::write(d.join("file"), "").unwrap();
    let e = claim_dir(&d.join("file"), "--out").unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_directory_that_is_a_link_is_refused_and_its_target_untouched() {
    let d = scratch("dirlink");
    let user = d.join("user");
    std::fs::create_dir(&user).unwrap();
    std::fs::write(user.join("photo.png"), "precious").unwrap();
    let out = d.join("out");
    claim_dir(&out, "--out").unwrap();
    std::os::unix::fs::symlink(&user, out.join("figures")).unwrap();
    let e = claim_subdir(&out, "figures", "figures")
        .unwrap_err()
        .to_string();
    assert!(e.contains("symbolic link"), "{e}");
    assert!(remove_claimed_dir(&out.join("figures")).is_err());
    // Even an empty target directory behind a link is refused.
    std::fs::create_dir(d.join("empty")).unwrap();
    std::os::unix::fs::symlink(d.join("empty"), d.join("to-empty")).unwrap();
    assert!(claim_dir(&d.join("to-empty"), "--out").is_err());
    assert!(!d.join("empty").join(MARKER).exists());
    assert_eq!(
        std::fs::read_to_string(user.join("photo.png")).unwrap(),
        "precious"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn only_files_the_manifest_lists_are_removed() {
    let d = scratch("manifest");
    let fig = claim_subdir(&d, "figures", "figures").unwrap();
    write_in_claimed(&fig.join("a.svg"), b"<svg/>").unwrap();
    write_in_claimed(&fig.join("a.png"), b"png").unwrap();
    std::fs::write(fig.join("mine.svg"), "the user's").unwrap();
    assert_eq!(
        manifest(&fig),
        ["a.png", "a.svg"].map(String::from).into_iter().collect()
    );
    let gone = remove_listed(&fig, |n| n.ends_with(".svg") || n.ends_with(".png")).unwrap();
    assert_eq!(gone.len(), 2);
    assert!(!fig.join("a.svg").exists() && !fig.join("a.png").exists());
    assert_eq!(
        std::fs::read_to_string(fig.join("mine.svg")).unwrap(),
        "the user's"
    );
    assert!(manifest(&fig).is_empty());
    // A listed name replaced by a link is not followed, nor removed.
    write_in_claimed(&fig.join("b.svg"), b"x").unwrap();
    std::fs::remove_file(fig.join("b.svg")).unwrap();
    std::os::unix::fs::symlink(fig.join("mine.svg"), fig.join("b.svg")).unwrap();
    remove_listed(&fig, |_| true).unwrap();
    assert!(is_symlink(&fig.join("b.svg")));
    assert!(fig.join("mine.svg").exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn own_files_are_replaced_atomically_and_never_through_a_link() {
    let d = scratch("atomic");
    claim_dir(&d.join("r"), "--out").unwrap();
    let r = d.join("r");
    write_in_claimed(&r.join("report.html"), b"one").unwrap();
    write_in_claimed(&r.join("report.html"), b"two").unwrap();
    assert_eq!(
        std::fs::read_to_string(r.join("report.html")).unwrap(),
        "two"
    );
    let user = d.join("user.txt");
    std::fs::write(&user, "keep me").unwrap();
    std::os::unix::fs::symlink(&user, r.join("runs.csv")).unwrap();
    let e = write_in_claimed(&r.join("runs.csv"), b"x").unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert!(create_in_claimed(&r.join("runs.csv")).is_err());
    assert!(check_in_claimed(&[&r.join("report.html"), &r.join("runs.csv")]).is_err());
    assert_eq!(std::fs::read_to_string(&user).unwrap(), "keep me");
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(&r)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("quiclab-tmp")),
        "{names:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn names_from_files_must_be_plain() {
    for ok in ["carlucci2015", "panda2019-s1", "a_b.c+d"] {
        plain_name(ok, "study").unwrap();
    }
    for bad in [
        "",
        "/abs/path",
        "../x",
        "a/b",
        ".",
        "..",
        ".hidden",
        "-flag",
        "a b",
        "ü",
    ] {
        let e = plain_name(bad, "study").unwrap_err();
        assert!(e.contains("not a plain name"), "{bad}: {e}");
    }
    let d = scratch("plain");
    assert!(claim_subdir(&d, "../escape", "study").is_err());
    assert!(!d.parent().unwrap().join("escape").exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn user_files_are_new_unless_forced_and_never_through_a_symlink() {
    let d = scratch("files");
    let f = d.join("page.har");
    write_user_file(&f, "--har", false, b"one").unwrap();
    let e = write_user_file(&f, "--har", false, b"two")
        .unwrap_err()
        .to_string();
    assert!(e.contains("--force") && e.starts_with("--har "), "{e}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "one");
    write_user_file(&f, "--har", true, b"two").unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "two");
    let target = d.join("precious");
    std::fs::write(&target, "keep me").unwrap();
    let link = d.join("link.har");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    for force in [false, true] {
        let e = write_user_file(&link, "--har", force, b"x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link") || e.contains("exists"), "{e}");
        assert!(UserFile::reserve(&link, "--har", force).is_err());
    }
    assert!(create_in_claimed(&link).is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    assert!(check_user_file(&f, "--har", false).is_err());
    check_user_file(&f, "--har", true).unwrap();
    check_user_file(&d.join("new.har"), "--har", false).unwrap();
    assert!(check_user_file(&link, "--har", true).is_err());
    assert!(check_user_file(&d.join("missing/x.har"), "--har", true).is_err());
    let e = write_user_file(&d.join("missing/x.har"), "--har", false, b"x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn devices_directories_and_trailing_slashes_are_refused_before_a_run() {
    let d = scratch("devices");
    for force in [false, true] {
        let e = check_user_file(Path::new("/dev/full"), "--pcap", force)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a regular file") || e.contains("exists"),
            "{e}"
        );
        assert!(UserFile::reserve(Path::new("/dev/null"), "--pcap", force).is_err());
    }
    let slash = format!("{}/", d.display());
    let e = check_user_file(Path::new(&slash), "--pcap", true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("directory"), "{e}");
    let e = check_user_file(&d.join("sub/"), "--pcap", true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("directory"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn one_file_named_by_two_flags_is_refused_however_spelled() {
    let d = scratch("twice");
    let a = d.join("x");
    let b = d.join("sub/../x");
    std::fs::create_dir(d.join("sub")).unwrap();
    let e = UserFile::reserve_all(&[(&a, "--pcap"), (&b, "--har")], false)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--har ") && e.contains("--pcap"), "{e}");
    assert!(!a.exists(), "nothing is created when refused");
    let e = UserFile::reserve_all(&[(&a, "--pcap"), (&a, "--waterfall")], true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("same file"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_reserved_file_holds_its_name_and_goes_when_unused() {
    let d = scratch("reserve");
    let f = d.join("out.har");
    {
        let mut r = UserFile::reserve(&f, "--har", false).unwrap();
        assert!(f.is_file(), "the name is held during the run");
        // A link planted meanwhile is replaced, not followed.
        let target = d.join("precious");
        std::fs::write(&target, "keep").unwrap();
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink(&target, &f).unwrap();
        r.write(b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "{}");
        assert!(!is_symlink(&f));
    }
    assert!(f.is_file(), "a written file stays");
    let unused = d.join("unused.har");
    drop(UserFile::reserve(&unused, "--har", false).unwrap());
    assert!(!unused.exists(), "an unused placeholder goes");
    // A user's file replaced with --force is not removed when unused.
    std::fs::write(&unused, "theirs").unwrap();
    drop(UserFile::reserve(&unused, "--har", true).unwrap());
    assert_eq!(std::fs::read_to_string(&unused).unwrap(), "theirs");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_write_that_fails_is_an_error_naming_the_flag() {
    let d = scratch("fails");
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut r = UserFile::reserve(&sub.join("x.har"), "--har", false).unwrap();
    std::fs::remove_dir_all(&sub).unwrap();
    let e = r.write(b"{}").unwrap_err().to_string();
    assert!(e.starts_with("--har ") && e.contains("x.har"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_directory_is_checked_before_hours_of_runs_without_being_touched() {
    let d = scratch("check");
    // New (absent) and empty: acceptable, and nothing is created or marked.
    let new = d.join("new");
    check_claimable(&new, "--keep-evidence").unwrap();
    assert!(!new.exists());
    check_claimable(&d, "--keep-evidence").unwrap();
    assert!(!d.join(MARKER).exists());
    // Someone else's files: the same refusal claim_dir gives, and nothing is written.
    std::fs::write(d.join("notes.txt"), "the user's own").unwrap();
    let e = check_claimable(&d, "--keep-evidence")
        .unwrap_err()
        .to_string();
    assert_eq!(e, claim_dir(&d, "--keep-evidence").unwrap_err().to_string());
    assert!(
        e.starts_with("--keep-evidence ") && e.contains("did not create"),
        "{e}"
    );
    assert!(!d.join(MARKER).exists());
    // quiclab's own: acceptable.
    let own = d.join("own");
    claim_dir(&own, "--out").unwrap();
    std::fs::write(own.join("x"), "").unwrap();
    check_claimable(&own, "--keep-evidence").unwrap();
    // A link and a file: refused.
    std::os::unix::fs::symlink(&own, d.join("link")).unwrap();
    assert!(check_claimable(&d.join("link"), "--keep-evidence").is_err());
    assert!(check_claimable(&d.join("notes.txt"), "--keep-evidence").is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_failed_command_removes_only_what_it_wrote() {
    let d = scratch("snapshot");
    let out = d.join("out");
    claim_dir(&out, "--out").unwrap();
    write_in_claimed(&out.join("results.sqlite"), b"earlier runs").unwrap();
    let traces = claim_subdir(&out, "traces", "--out").unwrap();
    write_in_claimed(&traces.join("run-1.json"), b"earlier trace").unwrap();
    std::fs::write(out.join("notes.txt"), "the user's").unwrap();
    let before = Snapshot::take(&out);
    // What a failing command then writes: a new file, a new trace, a new directory.
    write_in_claimed(&out.join("report.html"), b"new").unwrap();
    write_in_claimed(&traces.join("run-2.json"), b"new trace").unwrap();
    let figures = claim_subdir(&out, "figures", "--out").unwrap();
    write_in_claimed(&figures.join("a.svg"), b"<svg/>").unwrap();
    before.remove_new().unwrap();
    assert_eq!(
        std::fs::read(out.join("results.sqlite")).unwrap(),
        b"earlier runs"
    );
    assert_eq!(
        std::fs::read(traces.join("run-1.json")).unwrap(),
        b"earlier trace"
    );
    assert_eq!(std::fs::read(out.join("notes.txt")).unwrap(), b"the user's");
    assert!(!out.join("report.html").exists() && !traces.join("run-2.json").exists());
    assert!(!figures.exists());
    assert!(is_claimed(&out));
    // A directory the command made is removed whole.
    let fresh = d.join("fresh");
    let before = Snapshot::take(&fresh);
    claim_dir(&fresh, "--out").unwrap();
    write_in_claimed(&fresh.join("x"), b"x").unwrap();
    before.remove_new().unwrap();
    assert!(!fresh.exists());
    // An empty directory of the user's stays (without quiclab's marker).
    let empty = d.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let before = Snapshot::take(&empty);
    claim_dir(&empty, "--out").unwrap();
    write_in_claimed(&empty.join("x"), b"x").unwrap();
    before.remove_new().unwrap();
    assert!(empty.is_dir() && std::fs::read_dir(&empty).unwrap().count() == 0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_users_file_under_one_of_quiclabs_names_is_not_replaced() {
    let d = scratch("unlisted");
    let r = d.join("r");
    claim_dir(&r, "--out").unwrap();
    write_in_claimed(&r.join("report.html"), b"quiclab's").unwrap();
    std::fs::write(r.join("runs.csv"), "the user's own table").unwrap();
    for e in [
        write_in_claimed(&r.join("runs.csv"), b"x").unwrap_err(),
        create_in_claimed(&r.join("runs.csv")).unwrap_err(),
        write_set_in_claimed(&r, &[("report.html", b"y"), ("runs.csv", b"y")]).unwrap_err(),
    ] {
        assert!(e.to_string().contains("did not write"), "{e}");
    }
    assert_eq!(
        std::fs::read(r.join("runs.csv")).unwrap(),
        b"the user's own table"
    );
    // The set was refused whole: quiclab's own file is unchanged too.
    assert_eq!(std::fs::read(r.join("report.html")).unwrap(), b"quiclab's");
    write_set_in_claimed(&r, &[("report.html", b"new"), ("verdicts.md", b"new")]).unwrap();
    assert_eq!(std::fs::read(r.join("verdicts.md")).unwrap(), b"new");
    assert!(manifest(&r).contains("verdicts.md"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_directory_another_process_writes_is_refused_naming_it_or_waited_for() {
    let d = scratch("lock");
    claim_dir(&d.join("r"), "--out").unwrap();
    let r = d.join("r");
    // Another process holds the directory's lock (flock(1) locks a directory as quiclab does).
    let mut other = std::process::Command::new("flock")
        .arg(&r)
        .args(["sleep", "2"])
        .spawn()
        .expect("flock(1) (util-linux)");
    let held = std::time::Instant::now();
    let e = loop {
        match lock_dir(&r, "--out", false) {
            Err(e) => break e,
            // flock(1) has not taken the lock yet.
            Ok(l) => {
                drop(l);
                assert!(held.elapsed().as_secs() < 2, "flock(1) never took the lock");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    };
    let e = e.to_string();
    assert!(
        e.contains("another quiclab process is writing into it")
            && e.contains(&format!("pid {}", other.id())),
        "{e}"
    );
    // Waiting: granted once the other process ends.
    let lock = lock_dir(&r, "--out", true).unwrap();
    assert!(
        other.try_wait().unwrap().is_some(),
        "granted before the holder ended"
    );
    // Within one process the lock is re-entrant, and released with its last holder.
    let again = lock_dir(&r, "--out", false).unwrap();
    drop(lock);
    drop(again);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn temporary_files_of_dead_processes_are_removed_and_live_ones_kept() {
    let d = scratch("stale");
    claim_dir(&d, "--out").unwrap();
    let caps = claim_subdir(&d, "captures", "--out").unwrap();
    // PID 999999999 is past any pid_max: that process does not exist.
    let dead = caps.join(".run-00001.pcapng.quiclab-tmp-999999999-0.pcapng");
    let live = caps.join(format!(
        ".run-00002.pcapng.quiclab-tmp-{}-0.pcapng",
        std::process::id()
    ));
    let users = caps.join(".notes.quiclab-tmp-x");
    for p in [&dead, &live, &users] {
        std::fs::write(p, "x").unwrap();
    }
    assert_eq!(remove_stale_temps(&d), 1);
    assert!(!dead.exists() && live.exists() && users.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_unwritable_directory_is_refused_before_it_is_needed() {
    let d = scratch("writable");
    check_writable(&d.join("new/deeper"), "--keep-evidence").unwrap();
    check_writable(&d, "--keep-evidence").unwrap();
    assert!(!d.join("new").exists(), "the check made a directory");
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        0,
        "the check left a file"
    );
    std::fs::write(d.join("file"), "x").unwrap();
    let e = check_writable(&d.join("file/sub"), "--keep-evidence").unwrap_err();
    assert!(
        e.to_string().to_lowercase().contains("not a directory"),
        "{e}"
    );
    // A read-only mount, which root's permissions do not override (only as root).
    let ro = d.join("ro");
    std::fs::create_dir(&ro).unwrap();
    if std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=64k", "quiclab-test"])
        .arg(&ro)
        .status()
        .is_ok_and(|s| s.success())
    {
        let e1 = check_writable(&ro, "--keep-evidence").map(|_| ());
        let e2 = check_writable(&ro.join("evidence"), "--keep-evidence").map(|_| ());
        let _ = std::process::Command::new("umount").arg(&ro).status();
        for e in [e1, e2] {
            let e = e.unwrap_err().to_string();
            assert!(
                e.starts_with("--keep-evidence ") && e.contains("Read-only"),
                "{e}"
            );
        }
    } else {
        assert!(
            unsafe { libc::geteuid() } != 0,
            "as root, a read-only tmpfs could not be mounted"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn reads_of_stored_files_are_bounded() {
    let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let d = scratch("bounded");
    std::fs::write(d.join("big"), vec![b'x'; 2048]).unwrap();
    let e = read_bounded(&d.join("big"), 1024).unwrap_err();
    assert!(e.to_string().contains("larger than"), "{e}");
    assert_eq!(read_bounded(&d.join("big"), 4096).unwrap().len(), 2048);
    let _ = std::fs::remove_dir_all(&d);
}
