//! A test PKI made with the `openssl` command: a CA, and certificates it
//! issues for a server or a client, valid now or expired, for an address
//! or a DNS name (`openssl ca`, which can date a certificate in the past).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A certificate chain and its key (PEM files).
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Issued {
    pub fn cert(&self) -> &str {
        self.cert.to_str().expect("utf-8 path")
    }
    pub fn key(&self) -> &str {
        self.key.to_str().expect("utf-8 path")
    }
}

/// A CA in its own directory.
pub struct Pki {
    dir: PathBuf,
    pub ca: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("openssl is needed for the TLS tests");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

const KEY: [&str; 5] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

impl Pki {
    /// A new CA named `name` under `parent/name`.
    pub fn new(parent: &Path, name: &str) -> Pki {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).expect("pki dir");
        let subj = format!("/CN={name}");
        let mut args = vec!["req", "-x509"];
        args.extend(KEY);
        args.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", &subj]);
        openssl(&dir, &args);
        std::fs::write(dir.join("index.txt"), "").expect("index");
        std::fs::write(dir.join("serial"), "1000\n").expect("serial");
        std::fs::write(
            dir.join("ca.cnf"),
            "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n\
             default_md = sha256\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n",
        )
        .expect("ca.cnf");
        Pki { ca: dir.join("ca.pem"), dir }
    }

    pub fn ca(&self) -> &str {
        self.ca.to_str().expect("utf-8 path")
    }

    /// A certificate for subject `CN=cn` with `san` (`IP:127.0.0.1`,
    /// `DNS:x.example`; empty for a client's), valid now, or expired
    /// since 2020 with `expired`.
    pub fn issue(&self, cn: &str, san: &str, expired: bool) -> Issued {
        let stem = cn.replace(' ', "_");
        let (key, csr, pem, ext) =
            (format!("{stem}.key"), format!("{stem}.csr"), format!("{stem}.pem"), format!("{stem}.ext"));
        let subj = format!("/CN={cn}");
        let mut args = vec!["req"];
        args.extend(KEY);
        args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(&self.dir, &args);
        let ext_text =
            if san.is_empty() { "basicConstraints=CA:FALSE\n".to_string() } else { format!("subjectAltName={san}\n") };
        std::fs::write(self.dir.join(&ext), ext_text).expect("ext");
        let mut args = vec!["ca", "-batch", "-notext", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key"];
        args.extend(["-in", &csr, "-out", &pem, "-extfile", &ext]);
        match expired {
            true => args.extend(["-startdate", "20200101000000Z", "-enddate", "20200102000000Z"]),
            false => args.extend(["-days", "2"]),
        }
        openssl(&self.dir, &args);
        Issued { cert: self.dir.join(pem), key: self.dir.join(key) }
    }
}
