use super::*;
use proptest::prelude::*;

#[test]
fn urls_and_rsync_forms_name_user_host_port_and_directory() {
    let m = SshMirror::parse_url("ssh://ann@data.example:2222/srv/x").unwrap();
    assert_eq!(
        (m.user.as_deref(), m.host.as_str(), m.port, m.dir.as_str()),
        (Some("ann"), "data.example", Some(2222), "/srv/x")
    );
    assert_eq!(SshMirror::parse_url("ssh://h/~/x").unwrap().dir, "x");
    assert_eq!(SshMirror::parse_url("ssh://h").unwrap().dir, ".");
    assert_eq!(SshMirror::parse_url("ssh://[::1]:22/d").unwrap().host, "::1");
    let r = SshMirror::parse_rsync("bob@h:rel/dir").unwrap();
    assert_eq!((r.user.as_deref(), r.host.as_str(), r.dir.as_str()), (Some("bob"), "h", "rel/dir"));
    assert_eq!(SshMirror::parse_rsync("h:").unwrap().dir, ".");
    for m in [&m, &r] {
        assert_eq!(&SshMirror::parse_url(&m.to_string()).unwrap(), m, "{m}");
    }
}

#[test]
fn a_host_or_user_that_ssh_would_read_as_an_option_or_a_shell_word_is_refused() {
    for bad in [
        "ssh://-oProxyCommand=x/d",
        "ssh://a b/d",
        "ssh://h;rm/d",
        "ssh://-l@h/d",
        "ssh://u$(x)@h/d",
        "ssh://h:0/d",
        "ssh://h:99999/d",
        "ssh:///d",
    ] {
        assert!(SshMirror::parse_url(bad).is_err(), "{bad}");
    }
    assert!(SshMirror::parse_rsync("-oX=y:d").is_err());
    assert!(SshMirror::parse_url("ssh://h/a\nb").is_err());
}

#[test]
fn the_remote_command_is_single_quoted_words_after_the_host() {
    let m = SshMirror::parse_url("ssh://u@h:23/it's $(here)").unwrap();
    let c = m.command(&["ssh".into(), "-i".into(), "k".into()], &[], "/opt/dd ftpd");
    let args: Vec<String> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    assert_eq!(c.get_program(), "ssh");
    assert_eq!(args[..7], ["-i", "k", "-p", "23", "-l", "u", "--"]);
    assert_eq!(args[7], "h");
    assert_eq!(args[8], r"'/opt/dd ftpd' 'session' '--' '/it'\''s $(here)'");
    // What a shell makes of it: the words as they were.
    let out = Command::new("sh").arg("-c").arg(format!("printf '%s|' {}", args[8])).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/opt/dd ftpd|session|--|/it's $(here)|");
}

#[test]
fn rsh_is_split_into_words_with_quotes() {
    assert_eq!(split_rsh("ssh -i 'my key' -o \"A=b c\"").unwrap(), ["ssh", "-i", "my key", "-o", "A=b c"]);
    assert_eq!(split_rsh("  ssh  ").unwrap(), ["ssh"]);
    assert_eq!(split_rsh("ssh ''").unwrap(), ["ssh", ""]);
    assert!(split_rsh("ssh 'open").is_err());
    assert!(split_rsh("   ").is_err());
}

#[test]
fn an_announcement_is_checked_field_by_field() {
    let pin = "ab".repeat(32);
    let good = format!("{GREETING} 10.1.2.3 4000 {} {pin}\n", "t".repeat(64));
    let a = parse_announce(&good).unwrap();
    assert_eq!((a.host.to_string(), a.port, a.pin), ("10.1.2.3".to_string(), 4000, [0xab; 32]));
    assert!(!format!("{a:?}").contains("tttt"), "the token is never printed");
    for bad in [
        "".to_string(),
        format!("{GREETING} 10.1.2.3 4000 {} {pin} extra", "t".repeat(64)),
        format!("{GREETING} host 4000 {} {pin}", "t".repeat(64)),
        format!("{GREETING} 10.1.2.3 0 {} {pin}", "t".repeat(64)),
        format!("{GREETING} 10.1.2.3 4000 short {pin}"),
        format!("{GREETING} 10.1.2.3 4000 {} {}", "t".repeat(64), "zz".repeat(32)),
        format!("ddftpd-session 2 10.1.2.3 4000 {} {pin}", "t".repeat(64)),
    ] {
        assert!(parse_announce(&bad).is_err(), "{bad}");
    }
}

proptest! {
    /// Whatever a remote end answers, parsing it returns, and a token it
    /// takes is what was sent.
    #[test]
    fn any_answer_parses_or_is_refused(line in "\\PC{0,200}", token in "[!-~]{0,140}") {
        let _ = parse_announce(&line);
        let l = format!("{GREETING} 127.0.0.1 9 {token} {}", "0".repeat(64));
        if let Ok(a) = parse_announce(&l) {
            prop_assert_eq!(&*a.token, token.as_bytes());
        }
    }

    /// Whatever is given as a mirror, parsing returns, and a host it takes
    /// never starts as an option or holds a shell's characters.
    #[test]
    fn any_spec_parses_or_is_refused(s in "\\PC{0,80}") {
        for m in [SshMirror::parse_url(&format!("ssh://{s}")), SshMirror::parse_rsync(&s)].into_iter().flatten() {
            prop_assert!(plain_name(&m.host));
            prop_assert!(m.user.as_deref().is_none_or(plain_name));
        }
    }

    /// A quoted word is that word to a shell, whatever it holds.
    #[test]
    fn quoting_keeps_any_word(w in "[ -~]{0,40}") {
        let q = quote(&w);
        prop_assert!(q.starts_with('\'') && q.ends_with('\''));
        prop_assert_eq!(q.matches('\'').count(), 2 + 3 * w.matches('\'').count());
    }
}
