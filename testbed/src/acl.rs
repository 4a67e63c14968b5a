//! Least privilege on each switch's SONiC DB (`weft testbed up --acl`): Redis ACL users per
//! role, with passwords in files (0600) that the processes read, never on a command line.
//!
//! Redis ACLs select keys and commands, not databases, so each role is told apart by the keys
//! it writes, taken from the schema's owners (`weft_sonic_schema`):
//!
//! | user | reads | writes |
//! | --- | --- | --- |
//! | `weft-controller` | every key | APPL_DB's producer keys (`_P4RT_TABLE:*`, the key and del sets), Weft's CONFIG_DB tables, STATE_DB `WEFT_LOCK`, the fencing term |
//! | `weft-plugin` | every key | `P4RT_TABLE:*` (the consumer's moves in APPL_DB and APPL_STATE_DB), `_P4RT_TABLE:*` (popped), the plugin's STATE_DB tables, COUNTERS_DB (`COUNTERS*`, `WEFT_COUNTERS_SNAPSHOT`) |
//! | `default` | nothing: off | nothing |
//!
//! Neither may run admin commands (`CONFIG`, `SHUTDOWN`, `FLUSHALL`, `ACL`, `DEBUG` …).

use std::io::Read;
use std::path::{Path, PathBuf};

use weft_sonic_db::{SonicDbId, TERM_KEY};
use weft_sonic_schema::{Owner, tables_owned_by};

use crate::{Result, io};

pub const CONTROLLER_USER: &str = "weft-controller";
pub const PLUGIN_USER: &str = "weft-plugin";

/// The key patterns a role may write.
pub fn write_patterns(owner: Owner) -> Vec<String> {
    let table = |t: &str| format!("{t}|*");
    match owner {
        Owner::Controller => {
            let mut v = vec![
                "_P4RT_TABLE:*".to_string(),
                "P4RT_TABLE_KEY_SET".to_string(),
                "P4RT_TABLE_DEL_SET".to_string(),
                TERM_KEY.to_string(),
                // Named as keys of the producer's script, never keys themselves: the channel
                // and each operation's `TABLE:match` (the script prefixes it with `_P4RT_TABLE:`).
                "P4RT_TABLE_CHANNEL@*".to_string(),
                "FIXED_*:*".to_string(),
                "ACL_*:*".to_string(),
                "EXT_*:*".to_string(),
            ];
            for db in [SonicDbId::ConfigDb, SonicDbId::StateDb] {
                v.extend(
                    tables_owned_by(Owner::Controller, db)
                        .iter()
                        .map(|t| table(t)),
                );
            }
            v
        }
        _ => {
            let mut v = vec![
                "P4RT_TABLE:*".to_string(),
                "_P4RT_TABLE:*".to_string(),
                "P4RT_TABLE_KEY_SET".to_string(),
                "P4RT_TABLE_DEL_SET".to_string(),
                // COUNTERS_DB: COUNTERS:<oid>, COUNTERS_PORT_NAME_MAP, …, and the rows' copy.
                "COUNTERS*".to_string(),
                weft_sonic_schema::snapshot::KEY.to_string(),
            ];
            v.extend(
                tables_owned_by(Owner::Plugin, SonicDbId::StateDb)
                    .iter()
                    .map(|t| table(t)),
            );
            v
        }
    }
}

fn user_line(user: &str, password: &str, owner: Owner) -> String {
    let mut l = format!("user {user} on >{password} resetchannels &* %R~*");
    for p in write_patterns(owner) {
        l += &format!(" %RW~{p}");
    }
    l += " +@all -@admin -@dangerous +keys +info +select +ping +config|get +client|setname +client|id";
    l
}

/// The ACL file of a switch's redis-server: the two roles, `default` off.
pub fn acl_file(controller_password: &str, plugin_password: &str) -> String {
    format!(
        "user default off resetkeys -@all\n{}\n{}\n",
        user_line(CONTROLLER_USER, controller_password, Owner::Controller),
        user_line(PLUGIN_USER, plugin_password, Owner::Plugin)
    )
}

/// Where `up --acl` keeps them.
pub struct AclFiles {
    pub acl: PathBuf,
    pub controller: PathBuf,
    pub plugin: PathBuf,
}

fn password() -> Result<String> {
    let mut b = [0u8; 18];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(io("reading /dev/urandom"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("writing {}", path.display())))?;
    f.write_all(text.as_bytes())
        .map_err(io(format!("writing {}", path.display())))
}

/// Fresh passwords for a testbed: the ACL file every redis-server loads, and one credentials
/// file per role (`USER PASSWORD`, see `weft_sonic_db::read_credentials`).
pub fn write_files(state_dir: &Path) -> Result<AclFiles> {
    let dir = state_dir.join("acl");
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    let (c, p) = (password()?, password()?);
    let files = AclFiles {
        acl: dir.join("users.acl"),
        controller: dir.join("controller.cred"),
        plugin: dir.join("plugin.cred"),
    };
    write_private(&files.acl, &acl_file(&c, &p))?;
    write_private(&files.controller, &format!("{CONTROLLER_USER} {c}\n"))?;
    write_private(&files.plugin, &format!("{PLUGIN_USER} {p}\n"))?;
    Ok(files)
}

/// A DB endpoint that reads its credentials from `file`.
pub fn with_credentials(db: &str, file: &Path) -> String {
    let sep = if db.contains('?') { '&' } else { '?' };
    format!("{db}{sep}credentials={}", file.display())
}

/// The ACL files of a testbed started with `--acl`, if it was.
pub fn files(state_dir: &Path) -> Option<AclFiles> {
    let dir = state_dir.join("acl");
    let f = AclFiles {
        acl: dir.join("users.acl"),
        controller: dir.join("controller.cred"),
        plugin: dir.join("plugin.cred"),
    };
    f.acl.exists().then_some(f)
}
