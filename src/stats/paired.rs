//! Paired comparison of two strategies over the rounds of a `compare` run: the
//! Hodges-Lehmann estimate of the per-round difference and its distribution-free
//! confidence interval from the Wilcoxon signed-rank test (the round is the unit of
//! replication; see docs/timing.md for why).

/// The estimate and its interval for one paired sample of differences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Estimate {
    /// Median of the Walsh averages (d_i + d_j) / 2, i <= j.
    pub center: f64,
    /// The confidence interval, when there are enough pairs for the confidence asked
    /// (6 pairs for 95 %).
    pub interval: Option<(f64, f64)>,
}

/// Hodges-Lehmann estimate and Wilcoxon signed-rank interval of `d` (non-finite values
/// are left out) at `confidence` (e.g. 0.95). `None` when `d` is empty.
pub(crate) fn hodges_lehmann(d: &[f64], confidence: f64) -> Option<Estimate> {
    let d: Vec<f64> = d.iter().copied().filter(|x| x.is_finite()).collect();
    let n = d.len();
    if n == 0 {
        return None;
    }
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push((d[i] + d[j]) / 2.0);
        }
    }
    walsh.sort_by(f64::total_cmp);
    let m = walsh.len();
    let center = if m % 2 == 1 {
        walsh[m / 2]
    } else {
        (walsh[m / 2 - 1] + walsh[m / 2]) / 2.0
    };
    let interval =
        critical_value(n, (1.0 - confidence) / 2.0).map(|k| (walsh[k], walsh[m - 1 - k]));
    Some(Estimate { center, interval })
}

/// The largest k with P(W+ <= k) <= `tail` under the null hypothesis of the signed-rank
/// statistic W+ for n pairs (exact for n <= 60, normal approximation beyond); the interval
/// is then the (k+1)-th smallest and largest Walsh averages. `None` when even k = 0 has a
/// larger tail probability (too few pairs).
fn critical_value(n: usize, tail: f64) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let max_sum = n * (n + 1) / 2;
    if n <= 60 {
        // Number of subsets of {1..n} with each rank sum, as f64 (2^60 fits exactly
        // enough for probabilities).
        let mut ways = vec![0f64; max_sum + 1];
        ways[0] = 1.0;
        for r in 1..=n {
            for s in (r..=max_sum).rev() {
                ways[s] += ways[s - r];
            }
        }
        let total = 2f64.powi(n as i32);
        let mut cum = 0.0;
        let mut k = None;
        for (s, w) in ways.iter().enumerate() {
            cum += w / total;
            if cum <= tail {
                k = Some(s);
            } else {
                break;
            }
        }
        return k;
    }
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
    let z = normal_quantile(1.0 - tail);
    let k = (mean - z * sd - 0.5).floor();
    (k >= 0.0).then_some(k as usize)
}

/// The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_values_match_the_published_table() {
        // Two-sided 5 % (one tail 0.025): n=6 -> 0, n=8 -> 3, n=10 -> 8, n=20 -> 52,
        // n=30 -> 137 (tables of the Wilcoxon signed-rank test).
        assert_eq!(critical_value(5, 0.025), None);
        assert_eq!(critical_value(6, 0.025), Some(0));
        assert_eq!(critical_value(8, 0.025), Some(3));
        assert_eq!(critical_value(10, 0.025), Some(8));
        assert_eq!(critical_value(20, 0.025), Some(52));
        assert_eq!(critical_value(30, 0.025), Some(137));
        // The normal approximation continues the exact values smoothly.
        let exact = critical_value(60, 0.025).unwrap() as i64;
        let approx = {
            let nf = 60f64;
            (nf * (nf + 1.0) / 4.0
                - 1.959_964 * (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt()
                - 0.5)
                .floor() as i64
        };
        assert!((exact - approx).abs() <= 1, "{exact} vs {approx}");
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
    }

    #[test]
    fn estimate_is_the_walsh_median_and_the_interval_contains_it() {
        let d = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        let e = hodges_lehmann(&d, 0.95).unwrap();
        assert_eq!(e.center, 5.5);
        let (lo, hi) = e.interval.unwrap();
        assert!(lo < 5.5 && 5.5 < hi);
        // 55 Walsh averages, k = 8: the 9th smallest and the 9th largest.
        assert_eq!((lo, hi), (3.0, 8.0));
        // One wild round moves the estimate little.
        let mut wild = d;
        wild[9] = 1000.0;
        let w = hodges_lehmann(&wild, 0.95).unwrap();
        assert!((w.center - 5.5).abs() <= 1.0, "{w:?}");
        assert!(hodges_lehmann(&[1.0, 2.0, 3.0], 0.95)
            .unwrap()
            .interval
            .is_none());
    }
}
