//! Where the programs the testbed starts are.

use std::path::{Path, PathBuf};

use crate::error::{Result, TestbedError};

/// Where to find the programs the testbed starts.
#[derive(Debug, Clone)]
pub struct Programs {
    pub bmv2: PathBuf,
    pub redis: PathBuf,
    pub plugin: PathBuf,
}

pub(crate) fn find(name: &str, extra: &[&Path]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    extra
        .iter()
        .map(|d| d.join(name))
        .chain(std::env::split_paths(&path).map(|d| d.join(name)))
        .find(|p| p.is_file())
}

impl Programs {
    /// Only redis-server, for [`UpOptions::db_only`].
    pub fn locate_db_only() -> Result<Programs> {
        let redis = find("redis-server", &[])
            .ok_or_else(|| TestbedError::Missing("redis-server", "run scripts/setup.sh".into()))?;
        Ok(Programs {
            bmv2: PathBuf::new(),
            redis,
            plugin: PathBuf::new(),
        })
    }

    /// BMv2 from PATH or /opt/p4/bin; redis-server from PATH; the plugin next to this program
    /// or on PATH.
    pub fn locate() -> Result<Programs> {
        let here = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let bmv2 = find("simple_switch_grpc", &[Path::new("/opt/p4/bin")]).ok_or_else(|| {
            TestbedError::Missing(
                "BMv2 simple_switch_grpc",
                "looked on PATH and in /opt/p4/bin; build p4lang/PI and behavioral-model (README, \"BMv2 and p4c\")".into(),
            )
        })?;
        let redis = find("redis-server", &[])
            .ok_or_else(|| TestbedError::Missing("redis-server", "run scripts/setup.sh".into()))?;
        let plugin = find("weft-plugin", &[&here]).ok_or_else(|| {
            TestbedError::Missing(
                "weft-plugin",
                format!(
                    "build it (cargo build -p weft-sonic-plugin); looked in {} and on PATH",
                    here.display()
                ),
            )
        })?;
        Ok(Programs {
            bmv2,
            redis,
            plugin,
        })
    }
}
