//! Max-min fair sharing by progressive filling, for flows that may be split over several
//! links with fixed fractions (`a_fl`: the share of flow f's rate on link l), and completion
//! times with the rates recomputed whenever flows finish.
//!
//! The model does not need to run this at scale: when every flow of a step has the same size
//! and they all start together, the step ends exactly at `max_l bytes_l / c_l`. Progressive
//! filling freezes first the flows of the link with the least capacity per unit of crossing
//! rate, `min_l c_l / Σ_f a_fl`, at that rate, which is the smallest rate of all; a flow frozen
//! at level r crosses only links that saturate at levels ≥ r, so flows finishing (fastest
//! first, equal sizes) never change the rates of the slower ones. The slowest flows therefore
//! keep their first rate and end at `size · Σ_f a_fl / c_l = bytes_l / c_l` for that link, and no
//! link can need longer. [`completion_times`] checks this in the tests and handles unequal
//! sizes.

/// A flow: its size and its links with the fraction of its rate each carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub size: f64,
    pub links: Vec<(usize, f64)>,
}

const EPS: f64 = 1e-12;

/// Max-min fair rates of the `active` flows over links of capacity `cap`.
pub fn rates(cap: &[f64], flows: &[Flow], active: &[bool]) -> Vec<f64> {
    let mut rate = vec![0.0; flows.len()];
    let mut frozen: Vec<bool> = active.iter().map(|a| !a).collect();
    let mut residual = cap.to_vec();
    loop {
        let mut weight = vec![0.0; cap.len()];
        for (f, fl) in flows.iter().enumerate() {
            if !frozen[f] {
                for &(l, a) in &fl.links {
                    weight[l] += a;
                }
            }
        }
        let step = (0..cap.len())
            .filter(|&l| weight[l] > EPS)
            .map(|l| residual[l] / weight[l])
            .fold(f64::INFINITY, f64::min);
        if !step.is_finite() {
            // Flows on no constrained link: unbounded; treat as instantaneous.
            for (f, r) in rate.iter_mut().enumerate() {
                if !frozen[f] {
                    *r = f64::INFINITY;
                }
            }
            return rate;
        }
        for (f, r) in rate.iter_mut().enumerate() {
            if !frozen[f] {
                *r += step;
            }
        }
        let mut saturated = vec![false; cap.len()];
        for l in 0..cap.len() {
            if weight[l] > EPS {
                residual[l] -= step * weight[l];
                if residual[l] <= EPS * cap[l].max(1.0) {
                    saturated[l] = true;
                }
            }
        }
        let mut any = false;
        for (f, fl) in flows.iter().enumerate() {
            if !frozen[f] && fl.links.iter().any(|&(l, a)| a > EPS && saturated[l]) {
                frozen[f] = true;
                any = true;
            }
        }
        if !any || frozen.iter().all(|x| *x) {
            return rate;
        }
    }
}

/// When each flow finishes, all starting at 0, rates recomputed after every finish.
pub fn completion_times(cap: &[f64], flows: &[Flow]) -> Vec<f64> {
    let mut left: Vec<f64> = flows.iter().map(|f| f.size).collect();
    let mut active: Vec<bool> = left.iter().map(|&x| x > 0.0).collect();
    let mut done = vec![0.0; flows.len()];
    let mut now = 0.0;
    while active.iter().any(|a| *a) {
        let r = rates(cap, flows, &active);
        let dt = (0..flows.len())
            .filter(|&f| active[f])
            .map(|f| left[f] / r[f])
            .fold(f64::INFINITY, f64::min);
        now += dt;
        for f in 0..flows.len() {
            if active[f] {
                left[f] -= r[f] * dt;
                if left[f] <= 1e-9 * flows[f].size.max(1.0) {
                    active[f] = false;
                    done[f] = now;
                }
            }
        }
    }
    done
}

/// `max_l Σ_f size_f·a_fl / c_l`: the bottleneck link's work.
pub fn max_link_time(cap: &[f64], flows: &[Flow]) -> f64 {
    let mut load = vec![0.0; cap.len()];
    for f in flows {
        for &(l, a) in &f.links {
            load[l] += f.size * a;
        }
    }
    load.iter().zip(cap).map(|(b, c)| b / c).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::Rng;

    #[test]
    fn textbook_example_two_links_three_flows() {
        // Link 0 (cap 1): f0, f1; link 1 (cap 2): f1, f2. f0 = f1 = 0.5 (link 0), f2 = 1.5.
        let flows = vec![
            Flow {
                size: 1.0,
                links: vec![(0, 1.0)],
            },
            Flow {
                size: 1.0,
                links: vec![(0, 1.0), (1, 1.0)],
            },
            Flow {
                size: 1.0,
                links: vec![(1, 1.0)],
            },
        ];
        let r = rates(&[1.0, 2.0], &flows, &[true; 3]);
        assert!((r[0] - 0.5).abs() < 1e-12 && (r[1] - 0.5).abs() < 1e-12);
        assert!((r[2] - 1.5).abs() < 1e-12);
        let t = completion_times(&[1.0, 2.0], &flows);
        assert!((t[2] - 2.0 / 3.0).abs() < 1e-9);
        assert!((t[0] - 2.0).abs() < 1e-9 && (t[1] - 2.0).abs() < 1e-9);
    }

    fn random_instance(rng: &mut Rng, equal: bool) -> (Vec<f64>, Vec<Flow>) {
        let links = 2 + rng.below(8) as usize;
        let cap: Vec<f64> = (0..links).map(|_| 1.0 + rng.below(4) as f64).collect();
        let flows = (0..2 + rng.below(12))
            .map(|_| {
                let mut ls: Vec<(usize, f64)> = Vec::new();
                for l in 0..links {
                    if rng.below(3) == 0 {
                        // Some flows split: fractions like spray's.
                        ls.push((l, [1.0, 0.5, 0.25][rng.below(3) as usize]));
                    }
                }
                if ls.is_empty() {
                    ls.push((rng.below(links as u64) as usize, 1.0));
                }
                Flow {
                    size: if equal {
                        3.0
                    } else {
                        1.0 + rng.below(9) as f64
                    },
                    links: ls,
                }
            })
            .collect();
        (cap, flows)
    }

    #[test]
    fn equal_sized_flows_started_together_finish_when_the_busiest_link_has_carried_its_bytes() {
        let mut rng = Rng::new(11);
        for _ in 0..300 {
            let (cap, flows) = random_instance(&mut rng, true);
            let last = completion_times(&cap, &flows)
                .into_iter()
                .fold(0.0, f64::max);
            let bound = max_link_time(&cap, &flows);
            assert!(
                (last - bound).abs() <= 1e-6 * bound,
                "event-driven {last} vs bottleneck {bound}: {cap:?} {flows:?}"
            );
        }
    }

    #[test]
    fn with_unequal_sizes_the_bottleneck_is_only_a_lower_bound() {
        let mut rng = Rng::new(12);
        let mut strictly = 0;
        for _ in 0..300 {
            let (cap, flows) = random_instance(&mut rng, false);
            let last = completion_times(&cap, &flows)
                .into_iter()
                .fold(0.0, f64::max);
            let bound = max_link_time(&cap, &flows);
            assert!(last >= bound * (1.0 - 1e-9));
            if last > bound * (1.0 + 1e-6) {
                strictly += 1;
            }
        }
        assert!(
            strictly > 0,
            "unequal sizes must sometimes leave the bottleneck idle"
        );
    }
}
