//! Exact small-sample statistics for the scenarios' comparisons: a timing comparison on a
//! loaded 2-core machine is decided by a rank test with a stated significance, never by one
//! run or the best of several.
#![allow(dead_code)] // each scenario uses its own part

/// P(U ≤ u) for the Mann–Whitney U statistic of samples of sizes `m` and `n` when both come
/// from one distribution (no ties): the exact null distribution, counted.
pub fn mann_whitney_cdf(u: usize, m: usize, n: usize) -> f64 {
    // ways[k][j][x]: orderings of k values of the first sample and j of the second with U = x,
    // built by where the largest value comes from (the recurrence of Mann and Whitney, 1947).
    let max = m * n;
    let mut ways = vec![vec![vec![0f64; max + 1]; n + 1]; m + 1];
    for row in ways.iter_mut() {
        row[0][0] = 1.0;
    }
    for cell in ways[0].iter_mut() {
        cell[0] = 1.0;
    }
    for k in 1..=m {
        for j in 1..=n {
            for x in 0..=max {
                // The largest value is the first sample's: it is above all j of the second.
                let a = if x >= j { ways[k - 1][j][x - j] } else { 0.0 };
                let b = ways[k][j - 1][x];
                ways[k][j][x] = a + b;
            }
        }
    }
    let total: f64 = ways[m][n].iter().sum();
    let upto: f64 = ways[m][n].iter().take(u.min(max) + 1).sum();
    upto / total
}

/// The largest U whose P(U ≤ U) is at most `alpha` (the one-sided test rejects "no better"
/// when the observed U is at most this), or `None` when no outcome is that unlikely.
pub fn mann_whitney_critical(m: usize, n: usize, alpha: f64) -> Option<usize> {
    (0..=m * n)
        .take_while(|&u| mann_whitney_cdf(u, m, n) <= alpha)
        .last()
}

/// U for "`a` beats `b` by `margin`": the pairs (x of `a`, y of `b`) where x × margin is not
/// below y (a tie counts against `a`). Small U: `a` is smaller by the margin almost always.
pub fn pairs_not_beaten(a: &[f64], b: &[f64], margin: f64) -> usize {
    a.iter()
        .map(|x| b.iter().filter(|&&y| x * margin >= y).count())
        .sum()
}

#[cfg(test)]
mod tests {
    // Paths, not imports: a bench that includes this file compiles the module without its tests.
    #[test]
    fn the_exact_null_distribution_matches_the_published_tables() {
        // m = n = 3: 20 orderings, U = 0 in one of them.
        assert!((super::mann_whitney_cdf(0, 3, 3) - 1.0 / 20.0).abs() < 1e-12);
        assert!((super::mann_whitney_cdf(9, 3, 3) - 1.0).abs() < 1e-12);
        // One-sided critical values at 1%: U ≤ 9 for 8 and 8, U ≤ 3 for 6 and 6.
        assert_eq!(super::mann_whitney_critical(8, 8, 0.01), Some(9));
        assert_eq!(super::mann_whitney_critical(6, 6, 0.01), Some(3));
        assert_eq!(super::mann_whitney_critical(2, 2, 0.01), None);
    }

    #[test]
    fn pairs_not_beaten_counts_ties_against_the_first_sample() {
        assert_eq!(super::pairs_not_beaten(&[1.0, 2.0], &[3.0, 4.0], 1.0), 0);
        assert_eq!(super::pairs_not_beaten(&[1.0, 2.0], &[3.0, 4.0], 2.0), 2);
        assert_eq!(super::pairs_not_beaten(&[3.0], &[3.0], 1.0), 1);
    }
}
