//! Logs: `RUST_LOG`-style filtering, human or JSON lines
//! (`--log-format`, `LEADPIPE_LOG_FORMAT=json`), every line passed through
//! `domain::redact::mask` on its way out.

use std::io::{self, Write};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Wraps a writer so each formatted event is masked before it is written.
#[derive(Clone)]
pub struct Masking<M>(pub M);

pub struct MaskingWriter<W>(W);

impl<W: Write> Write for MaskingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The formatter hands over one whole event per call.
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(domain::redact::mask(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Masking<M> {
    type Writer = MaskingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        MaskingWriter(self.0.make_writer())
    }
}

/// The filter without `RUST_LOG`.
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,sea_orm=warn";

/// How each log line is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// For people: one line of text an event.
    #[default]
    Text,
    /// One JSON object a line, for a log pipeline.
    Json,
}

impl LogFormat {
    /// `json` (any case) is JSON; anything else is text, as it always was.
    pub fn parse(text: &str) -> Result<Self, std::convert::Infallible> {
        Ok(if text.trim().eq_ignore_ascii_case("json") {
            Self::Json
        } else {
            Self::Text
        })
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (else [`DEFAULT_FILTER`]).
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    install(io::stderr, filter, format);
}

/// Installs the global subscriber writing text to `writer` (tests capture
/// logs this way).
pub fn init_with<W>(writer: W, filter: EnvFilter)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    install(writer, filter, LogFormat::Text);
}

/// Installs the global subscriber writing to `writer` in `format`.
pub fn install<W>(writer: W, filter: EnvFilter, format: LogFormat)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let ansi = std::io::IsTerminal::is_terminal(&io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(Masking(writer));
    let result = if format == LogFormat::Json {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.try_init()
    };
    // A second init (tests) keeps the first subscriber.
    drop(result);
}
