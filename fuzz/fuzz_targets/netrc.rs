//! A `.netrc` (or `--header`, or a URL's user info) of any text: parsed
//! without a panic, and a header that parses cannot split a request.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ddftp::http::auth::netrc(text);
    let _ = ddftp::http::auth::decode(text);
    if let Ok((n, v)) = ddftp::http::auth::header(text) {
        assert!(!n.contains(['\r', '\n']) && !v.contains(['\r', '\n']));
    }
    // A URL's user info never stays in the URL shown in messages.
    if let Ok(m) = ddftp::http::HttpMirror::parse(text, "f") {
        let rest = text.strip_prefix("http://").or_else(|| text.strip_prefix("https://")).unwrap_or("");
        let authority = rest.split('/').next().unwrap_or("");
        if let Some((info, _)) = authority.rsplit_once('@').filter(|(i, _)| !i.is_empty()) {
            assert!(!m.url.contains(&format!("{info}@")), "{text:?} shown as {:?}", m.url);
        }
    }
});
