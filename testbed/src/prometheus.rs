//! A Prometheus scrape configuration for a testbed's plugins and controller.

use std::time::Duration;

use crate::state::{State, SwitchState};

/// A Prometheus configuration scraping every plugin of the testbed (and `weft run` at
/// `controller`, when given), every `interval`, loading the alerting rules in `rules` when
/// given. Prometheus has to run in the fabric namespace (`ip netns exec <netns> prometheus
/// ...`): that is where the plugins listen.
pub fn prometheus_config(
    st: &State,
    controller: Option<&str>,
    interval: Duration,
    rules: Option<&std::path::Path>,
) -> String {
    let secs = format!("{}ms", interval.as_millis().max(100));
    let mut out = format!(
        "# Prometheus scrape configuration for Weft testbed {fabric}, written by\n\
         # `weft testbed prometheus-config`. The plugins listen in the fabric's network\n\
         # namespace, so run Prometheus there:\n\
         #   ip netns exec {ns} prometheus --config.file=THIS_FILE --storage.tsdb.path=DIR\n\
         #   and weft run with --metrics {ctl} (also in {ns}) for the controller's job.\n\
         global:\n  scrape_interval: {secs}\n  evaluation_interval: {secs}\n",
        fabric = st.fabric,
        ns = st.netns,
        ctl = controller.unwrap_or("127.0.0.1:19400"),
    );
    if let Some(r) = rules {
        out.push_str(&format!(
            "rule_files:\n  - '{}'\n",
            r.display().to_string().replace('\'', "''")
        ));
    }
    out.push_str("scrape_configs:\n");
    out.push_str("  - job_name: weft-plugin\n    honor_labels: true\n    static_configs:\n");
    let targets: Vec<&SwitchState> = st.switches.iter().filter(|s| s.metrics.is_some()).collect();
    if targets.is_empty() {
        out.push_str("      []\n");
    }
    for s in targets {
        let addr = s.metrics.as_deref().unwrap_or_default();
        out.push_str(&format!(
            "      - targets: ['{addr}']\n        labels: {{ weft_switch: '{}' }}\n",
            s.name
        ));
    }
    if let Some(c) = controller {
        out.push_str(&format!(
            "  - job_name: weft-controller\n    honor_labels: true\n    static_configs:\n      - targets: ['{c}']\n        labels: {{ fabric: '{}' }}\n",
            st.fabric
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn every_plugin_with_metrics_is_a_target_and_the_controller_a_job_of_its_own() {
        let st = fixtures::state(std::path::Path::new("/run/weft/testbed/lab"));
        let c = prometheus_config(
            &st,
            Some("127.0.0.1:19400"),
            Duration::from_secs(1),
            Some(std::path::Path::new("/tmp/weft-alerts.yml")),
        );
        assert!(
            c.contains("rule_files:\n  - '/tmp/weft-alerts.yml'\nscrape_configs:\n"),
            "{c}"
        );
        assert!(c.contains("  scrape_interval: 1000ms\n"), "{c}");
        assert!(c.contains("ip netns exec weft-lab prometheus"), "{c}");
        assert!(
            c.contains(
                "      - targets: ['127.0.0.1:19401']\n        labels: { weft_switch: 'spine1' }\n"
            ),
            "{c}"
        );
        assert!(
            !c.contains("leaf1"),
            "a plugin without metrics is a target: {c}"
        );
        assert!(c.contains("  - job_name: weft-controller\n"), "{c}");
        assert!(c.contains("labels: { fabric: 'lab' }"), "{c}");
    }

    #[test]
    fn no_plugin_with_metrics_is_an_empty_target_list_and_intervals_have_a_floor() {
        let mut st = fixtures::state(std::path::Path::new("/tmp"));
        for s in &mut st.switches {
            s.metrics = None;
        }
        let c = prometheus_config(&st, None, Duration::from_millis(10), None);
        assert!(!c.contains("rule_files"), "{c}");
        assert!(c.contains("static_configs:\n      []\n"), "{c}");
        assert!(c.contains("scrape_interval: 100ms"), "{c}");
        assert!(!c.contains("weft-controller"), "{c}");
    }
}
