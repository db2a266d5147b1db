//! A push's two ends agreeing: the archive flags the pushing end passes
//! on to the `ddftp archive` it runs over ssh (the rules as rsync's `-f`
//! words, in their order), and the remote end reading where the pushing
//! end serves from.

use ddftp::archive::filter::Filter;

use super::archive_opt::ArchiveOpt;

/// The flags the remote archive is given: those a push passes on, the
/// filter rules (`filter`, from every rule flag in its order) as `-f`
/// rules.
pub(super) fn passed_on(o: &ArchiveOpt, filter: &Filter) -> Result<Vec<String>, String> {
    if o.list.is_some() {
        return Err("pushing takes no --list yet (its file is on this host)".into());
    }
    if o.files_from.is_some() && o.src.len() > 1 {
        return Err("--files-from takes one SRC, the directory its names start from (as rsync)".into());
    }
    if (o.delete || o.delete_excluded) && o.src.len() > 1 {
        // Each SRC goes in a push of its own: each would delete what the
        // others put in DIR.
        return Err(
            "--delete with several SRCs pushed is not supported: push one SRC (a directory holding them)".into()
        );
    }
    let mut v: Vec<String> = vec![];
    for (on, flag) in [
        (o.dry_run, "-n"),
        (o.itemize, "-i"),
        (o.relative && o.files_from.is_none(), "-R"),
        (o.delete, "--delete"),
        (o.delete_excluded, "--delete-excluded"),
        (o.xattrs, "-X"),
        (o.hard_links, "-H"),
        (o.checksum, "-c"),
        (o.ignore_existing, "--ignore-existing"),
        (o.existing, "--existing"),
        (o.update, "-u"),
        (o.size_only, "--size-only"),
        (o.one_file_system > 0, "-x"),
        (o.one_file_system > 1, "-x"),
        (o.whole_file, "--whole-file"),
        (o.no_owner, "--no-owner"),
        (o.by_name, "--by-name"),
        (o.backup, "-b"),
        (o.moving.quiet, "-q"),
        (o.moving.json, "--json"),
        (o.stats_asked(), "--stats"),
    ] {
        if on {
            v.push(flag.into());
        }
    }
    v.extend(o.links.flags().map(String::from));
    v.extend(o.sizes.flags());
    if o.modify_window != 0 {
        v.push(format!("--modify-window={}", o.modify_window));
    }
    // Applied where the tree is received, under that side's umask, as
    // rsync's.
    v.extend(o.chmod.iter().map(|c| format!("--chmod={c}")));
    v.extend(o.keep.chown.iter().map(|c| format!("--chown={c}")));
    v.extend(o.keep.usermap.iter().map(|c| format!("--usermap={c}")));
    v.extend(o.keep.groupmap.iter().map(|c| format!("--groupmap={c}")));
    if let Some(n) = o.max_delete {
        v.extend(["--max-delete".into(), n.to_string()]);
    }
    // -a's parts, if only some: as one flag (and --devices/--specials).
    if let Some(f) = o.keep.kept().ok().as_ref().and_then(super::rsync_keep::Keep::flag) {
        v.extend(f.split(' ').map(String::from));
    }
    // `--suffix=` may be empty: one word either way.
    if let Some(s) = &o.suffix {
        v.push(format!("--suffix={s}"));
    }
    if let Some(d) = &o.backup_dir {
        v.push(format!("--backup-dir={}", d.display()));
    }
    // On the receiving end, as rsync's.
    for (flag, dirs) in [("link-dest", &o.link_dest), ("compare-dest", &o.compare_dest), ("copy-dest", &o.copy_dest)] {
        v.extend(dirs.iter().map(|d| format!("--{flag}={}", d.display())));
    }
    for rule in filter.words() {
        v.extend(["-f".into(), rule]);
    }
    // The list itself follows the serving end's line on standard input.
    if o.files_from.is_some() {
        v.extend(["--files-from".into(), "-".into()]);
        if o.from0 {
            v.push("-0".into());
        }
    }
    Ok(v)
}

/// The serving end of a push, from the line on standard input: at the
/// address the ssh client came from (`SSH_CONNECTION`).
pub(super) fn pushed_from() -> Result<ddftp::session::Peer, String> {
    let from = std::env::var("SSH_CONNECTION")
        .ok()
        .and_then(|c| c.split_whitespace().next().map(String::from))
        .ok_or("--session-stdin is for a push over ssh (SSH_CONNECTION is not set)")?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::Read::take(std::io::stdin().lock(), 1024), &mut line)
        .map_err(|e| format!("reading the pushing end's line: {e}"))?;
    let line = line.replacen(&format!("{} - ", ddftp::ssh::GREETING), &format!("{} {from} ", ddftp::ssh::GREETING), 1);
    let a = ddftp::ssh::parse_announce(&line).map_err(|e| format!("the pushing end: {e}"))?;
    Ok(ddftp::ssh::peer(a, format!("ssh push from {from}")))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        o: ArchiveOpt,
    }

    #[test]
    fn a_push_passes_sizes_one_file_system_the_window_chmod_and_chown_on() {
        let args = ["t", "src", "-d", "out", "-xx", "--max-size=1.5k-1", "--min-size", "2", "-u", "-@", "-1"];
        let chmod =
            ["--chmod", "Dg+s,F644", "--chmod=o-rwx", "--chown", "nobody:", "--link-dest", "../a", "--link-dest=/b"];
        let o = Cmd::try_parse_from(args.iter().chain(&chmod)).expect("flags parse").o;
        let v = passed_on(&o, &Filter::new(&[]).unwrap()).unwrap();
        let wants = ["-x", "-u", "--max-size=1535", "--min-size=2", "--modify-window=-1"];
        for want in wants.iter().chain(&["--chmod=Dg+s,F644", "--chmod=o-rwx", "--chown=nobody:"]) {
            assert!(v.iter().any(|w| w == want), "{want} in {v:?}");
        }
        assert_eq!(v.iter().filter(|w| *w == "-x").count(), 2, "-xx as two: {v:?}");
        let dests: Vec<&String> = v.iter().filter(|w| w.starts_with("--link-dest=")).collect();
        assert_eq!(dests, ["--link-dest=../a", "--link-dest=/b"], "in order, for the receiving end");
    }
}
