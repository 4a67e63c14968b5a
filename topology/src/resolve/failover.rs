//! Link failover: hold-down and dampening.

use super::ctx::Ctx;
use crate::model::FailoverSpec;
use crate::topo::{Dampening, Failover};
use crate::units::Duration;

pub(super) fn resolve_failover(cx: &mut Ctx, f: &FailoverSpec) -> Failover {
    let d = &f.dampening;
    let damp = Dampening {
        enabled: d.enabled.unwrap_or(true),
        penalty: d.penalty.unwrap_or(1000),
        suppress: d.suppress.unwrap_or(2000),
        reuse: d.reuse.unwrap_or(750),
        half_life: d.half_life.unwrap_or(Duration::millis(5000)),
        max_suppress: d.max_suppress.unwrap_or(Duration::millis(60_000)),
    };
    if damp.reuse >= damp.suppress {
        let at = if d.reuse.is_some() || d.suppress.is_none() {
            "failover.dampening.reuse"
        } else {
            "failover.dampening.suppress"
        };
        cx.err(
            at,
            "failover.dampening",
            format!(
                "reuse {} must be below suppress {}",
                damp.reuse, damp.suppress
            ),
        );
    }
    if damp.half_life.as_nanos() == 0 {
        cx.err(
            "failover.dampening.half_life",
            "failover.dampening",
            "half_life must be positive",
        );
    }
    Failover {
        hold_down: f.hold_down.unwrap_or(Duration::millis(2000)),
        dampening: damp,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, valid};
    use crate::units::Duration;

    #[test]
    fn failover_defaults_to_two_seconds_of_hold_down_and_dampening_on() {
        let f = valid(SMALL).failover;
        assert_eq!(f.hold_down, Duration::millis(2000));
        let d = f.dampening;
        assert!(d.enabled);
        assert_eq!((d.penalty, d.suppress, d.reuse), (1000, 2000, 750));
    }

    #[test]
    fn reuse_must_be_below_suppress_where_written() {
        let e = errors(&format!(
            "{SMALL}failover:\n  dampening:\n    reuse: 3000\n"
        ));
        assert_eq!(e, vec!["19: reuse 3000 must be below suppress 2000"]);
        let e = errors(&format!(
            "{SMALL}failover:\n  dampening:\n    reuse: 100\n    suppress: 50\n    half_life: 0ms\n"
        ));
        assert_eq!(
            e,
            vec![
                "19: reuse 100 must be below suppress 50",
                "21: half_life must be positive"
            ]
        );
    }
}
