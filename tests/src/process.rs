//! What a process has cost so far, for the benches' "where the CPU went" lines.

/// User + system CPU seconds process `pid` has used so far (`/proc/PID/stat`), 0 when it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces: the fields start after its closing parenthesis, utime
    // and stime being the 12th and 13th of them (fields 14 and 15 of proc(5)), in clock ticks
    // of USER_HZ = 100.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<f64>().ok())
        .sum::<f64>()
        / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_used_some_cpu_and_a_gone_one_none() {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_seconds(std::process::id()) > 0.0);
        assert_eq!(cpu_seconds(u32::MAX), 0.0);
    }
}
