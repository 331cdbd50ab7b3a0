//! Reading values out of a Prometheus text scrape.

/// The value of one sample in Prometheus text, summed over the series of
/// `name` that carry every one of `labels`; 0 if absent.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|(_, value)| value.parse::<f64>().unwrap())
        .sum()
}

/// The value of the line that starts with `series` (a name, with its labels
/// written out as they appear), if there is one.
pub fn series_value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

impl crate::TestApp {
    /// Scrapes this app's metrics until `check` holds on the text (gauges
    /// refresh in the background); returns that scrape, or panics naming
    /// `what` with the last scrape after 15 s.
    pub async fn metrics_until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        crate::eventually(what, std::time::Duration::from_secs(15), async || {
            let text = self.metrics().await;
            if check(&text) {
                Ok(text)
            } else {
                Err(format!("\n{text}"))
            }
        })
        .await
    }
}
