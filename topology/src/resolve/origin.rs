//! Where a speed or a cable length was set: a port's speed starts at the fabric's default (or a
//! generator's uplink speed), a written port, link or host speed replaces it, and the line that
//! set the value in the end is where a problem with the ECN/PFC values derived from it is shown.

use crate::generators::GenContext;
use crate::model::{Defaults, Generator};
use crate::units::Speed;

use super::defaults::{DEFAULT_CABLE, DEFAULT_HOST_CABLE, DEFAULT_SPEED};

/// Which line set a speed or a cable length, so that a problem found in a value derived from it
/// (headroom, pause threshold) points there. `Builtin` is a default nobody wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Src {
    Builtin,
    DefaultsSpeed,
    DefaultsHostSpeed,
    DefaultsCable,
    DefaultsHostCable,
    GenUplinkSpeed(u32),
    GenUplinkCable(u32),
    PortSpeed(u32, u32),
    PortCable(u32, u32),
    LinkSpeed(u32),
    LinkCable(u32),
    HostSpeed(u32),
    HostCable(u32),
}

impl Src {
    pub(super) fn path(self) -> Option<String> {
        Some(match self {
            Src::Builtin => return None,
            Src::DefaultsSpeed => "fabric.defaults.speed".into(),
            Src::DefaultsHostSpeed => "fabric.defaults.host_speed".into(),
            Src::DefaultsCable => "fabric.defaults.cable_length".into(),
            Src::DefaultsHostCable => "fabric.defaults.host_cable_length".into(),
            Src::GenUplinkSpeed(g) => format!("generators[{g}].uplink_speed"),
            Src::GenUplinkCable(g) => format!("generators[{g}].uplink_cable_length"),
            Src::PortSpeed(s, p) => format!("switches[{s}].ports[{p}].speed"),
            Src::PortCable(s, p) => format!("switches[{s}].ports[{p}].cable_length"),
            Src::LinkSpeed(l) => format!("links[{l}].speed"),
            Src::LinkCable(l) => format!("links[{l}].cable_length"),
            Src::HostSpeed(h) => format!("hosts[{h}].speed"),
            Src::HostCable(h) => format!("hosts[{h}].cable_length"),
        })
    }
}

/// Per switch draft: where each port's speed and cable length came from, and at which index
/// of the explicit switch's `ports` the port was written (if it was).
pub(super) struct PortOrigins {
    pub(super) src: Vec<(Src, Src)>,
    pub(super) written_at: Vec<Option<u32>>,
}

/// Where a link's or host's own speed and cable length came from; `None`: from its port(s).
pub(super) type ItemSrc = (Option<Src>, Option<Src>);

/// The fabric-wide speeds and cable lengths (`fabric.defaults`, else built in) and where each was
/// set: what every port starts from.
pub(super) struct FabricDefaults {
    pub(super) values: GenContext,
    /// Where `values.speed` and `values.cable` were set.
    pub(super) speed: Src,
    pub(super) cable: Src,
    /// Where a generated host's speed and cable length were set.
    pub(super) host_speed: Src,
    pub(super) host_cable: Src,
    host_speed_written: bool,
}

impl FabricDefaults {
    pub(super) fn of(d: &Defaults) -> Self {
        let speed_value = d.speed.unwrap_or(DEFAULT_SPEED);
        let speed = if d.speed.is_some() {
            Src::DefaultsSpeed
        } else {
            Src::Builtin
        };
        let cable = if d.cable_length.is_some() {
            Src::DefaultsCable
        } else {
            Src::Builtin
        };
        FabricDefaults {
            values: GenContext {
                speed: speed_value,
                host_speed: d.host_speed.unwrap_or(speed_value),
                cable: d.cable_length.unwrap_or(DEFAULT_CABLE),
                host_cable: d.host_cable_length.unwrap_or(DEFAULT_HOST_CABLE),
            },
            speed,
            cable,
            host_speed: if d.host_speed.is_some() {
                Src::DefaultsHostSpeed
            } else {
                speed
            },
            host_cable: if d.host_cable_length.is_some() {
                Src::DefaultsHostCable
            } else {
                Src::Builtin
            },
            host_speed_written: d.host_speed.is_some(),
        }
    }

    /// Where a generated port's speed came from, told by its value: the generator sets uplink
    /// ports to `uplink_speed` and host ports to `host_speed`.
    pub(super) fn generated_port_speed(&self, g: &Generator, gi: u32, v: Speed) -> Src {
        let ctx = &self.values;
        if let Generator::LeafSpine {
            uplink_speed: Some(u),
            ..
        } = g
            && v == *u
            && !(self.host_speed_written && v == ctx.host_speed)
        {
            return Src::GenUplinkSpeed(gi);
        }
        if self.host_speed_written && v == ctx.host_speed && v != ctx.speed {
            return Src::DefaultsHostSpeed;
        }
        self.speed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Length;

    fn defaults(yaml: &str) -> Defaults {
        serde_yaml_ng::from_str(yaml).expect("defaults")
    }

    fn leaf_spine(uplink: &str) -> Generator {
        serde_yaml_ng::from_str(&format!(
            "{{kind: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 1, uplink_speed: {uplink}}}"
        ))
        .expect("generator")
    }

    #[test]
    fn each_source_names_the_line_that_sets_it_and_a_builtin_default_names_none() {
        assert_eq!(Src::Builtin.path(), None);
        assert_eq!(
            Src::DefaultsSpeed.path().as_deref(),
            Some("fabric.defaults.speed")
        );
        assert_eq!(
            Src::GenUplinkSpeed(1).path().as_deref(),
            Some("generators[1].uplink_speed")
        );
        assert_eq!(
            Src::PortCable(2, 3).path().as_deref(),
            Some("switches[2].ports[3].cable_length")
        );
        assert_eq!(Src::LinkSpeed(4).path().as_deref(), Some("links[4].speed"));
        assert_eq!(
            Src::HostCable(5).path().as_deref(),
            Some("hosts[5].cable_length")
        );
    }

    #[test]
    fn unwritten_defaults_are_the_builtin_values_set_by_nobody() {
        let f = FabricDefaults::of(&Defaults::default());
        assert_eq!(
            (f.values.speed, f.values.host_speed),
            (DEFAULT_SPEED, DEFAULT_SPEED)
        );
        assert_eq!(
            (f.values.cable, f.values.host_cable),
            (DEFAULT_CABLE, DEFAULT_HOST_CABLE)
        );
        assert_eq!(
            (f.speed, f.cable, f.host_speed, f.host_cable),
            (Src::Builtin, Src::Builtin, Src::Builtin, Src::Builtin)
        );
    }

    #[test]
    fn a_host_speed_follows_the_fabric_speed_unless_written() {
        let f = FabricDefaults::of(&defaults("speed: 400G"));
        assert_eq!(f.values.host_speed, Speed::gbps(400));
        assert_eq!(f.host_speed, Src::DefaultsSpeed);
        let f = FabricDefaults::of(&defaults(
            "speed: 400G\nhost_speed: 100G\nhost_cable_length: 3m",
        ));
        assert_eq!(f.values.host_speed, Speed::gbps(100));
        assert_eq!(f.values.host_cable, Length::metres(3));
        assert_eq!(
            (f.host_speed, f.host_cable),
            (Src::DefaultsHostSpeed, Src::DefaultsHostCable)
        );
    }

    #[test]
    fn a_generated_port_speed_is_told_uplink_host_or_default_by_its_value() {
        let f = FabricDefaults::of(&defaults("speed: 400G\nhost_speed: 100G"));
        let g = leaf_spine("800G");
        assert_eq!(
            f.generated_port_speed(&g, 2, Speed::gbps(800)),
            Src::GenUplinkSpeed(2)
        );
        assert_eq!(
            f.generated_port_speed(&g, 2, Speed::gbps(100)),
            Src::DefaultsHostSpeed
        );
        assert_eq!(
            f.generated_port_speed(&g, 2, Speed::gbps(400)),
            Src::DefaultsSpeed
        );
        // An uplink speed equal to the written host speed: the host speed's line is blamed.
        let g = leaf_spine("100G");
        assert_eq!(
            f.generated_port_speed(&g, 0, Speed::gbps(100)),
            Src::DefaultsHostSpeed
        );
    }
}
