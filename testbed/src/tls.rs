//! P4Runtime over TLS between each plugin and its BMv2 (`weft testbed up --tls`): a CA made for
//! the testbed signs BMv2's server certificate (for 127.0.0.1 and localhost) and one client
//! certificate the plugins present; BMv2 requires it (mutual TLS). Keys are 0600 files in the
//! state directory, made with `openssl`.

use std::path::{Path, PathBuf};

use crate::{Result, TestbedError, run};

pub struct TlsFiles {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Makes the CA, BMv2's certificate and the plugins' client certificate.
pub fn write_files(state_dir: &Path) -> Result<TlsFiles> {
    let dir = state_dir.join("tls");
    std::fs::create_dir_all(&dir)
        .map_err(|e| TestbedError::Other(format!("creating {}: {e}", dir.display())))?;
    let f = TlsFiles {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
    };
    let ca_key = dir.join("ca.key");
    run(&[
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "7",
        "-subj",
        "/CN=weft-testbed-ca",
        "-keyout",
        &s(&ca_key),
        "-out",
        &s(&f.ca),
    ])?;
    for (cert, key, cn, ext) in [
        (
            &f.server_cert,
            &f.server_key,
            "localhost",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        ),
        (
            &f.client_cert,
            &f.client_key,
            "weft-plugin",
            "extendedKeyUsage=clientAuth\n",
        ),
    ] {
        let csr = cert.with_extension("csr");
        let extfile = cert.with_extension("ext");
        std::fs::write(&extfile, ext)
            .map_err(|e| TestbedError::Other(format!("{}: {e}", extfile.display())))?;
        run(&[
            "openssl",
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            &s(key),
            "-out",
            &s(&csr),
        ])?;
        run(&[
            "openssl",
            "x509",
            "-req",
            "-days",
            "7",
            "-in",
            &s(&csr),
            "-CA",
            &s(&f.ca),
            "-CAkey",
            &s(&ca_key),
            "-CAcreateserial",
            "-extfile",
            &s(&extfile),
            "-out",
            &s(cert),
        ])?;
        let _ = std::fs::remove_file(&csr);
        let _ = std::fs::remove_file(&extfile);
    }
    use std::os::unix::fs::PermissionsExt;
    for k in [&ca_key, &f.server_key, &f.client_key] {
        let _ = std::fs::set_permissions(k, std::fs::Permissions::from_mode(0o600));
    }
    Ok(f)
}

/// BMv2's server options (after its `--`).
pub fn bmv2_args(f: &TlsFiles) -> Vec<String> {
    vec![
        "--grpc-server-ssl".into(),
        "--grpc-server-cacert".into(),
        s(&f.ca),
        "--grpc-server-cert".into(),
        s(&f.server_cert),
        "--grpc-server-key".into(),
        s(&f.server_key),
        "--grpc-server-with-client-auth".into(),
    ]
}

/// The plugin's client options.
pub fn plugin_args(f: &TlsFiles) -> Vec<String> {
    vec![
        "--p4rt-ca-cert".into(),
        s(&f.ca),
        "--p4rt-cert".into(),
        s(&f.client_cert),
        "--p4rt-key".into(),
        s(&f.client_key),
    ]
}
