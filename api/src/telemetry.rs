//! Logs: `RUST_LOG`-style filtering, human or JSON lines
//! (`LEADPIPE_LOG_FORMAT=json`), every line passed through
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

pub const DEFAULT_FILTER: &str = "info,sqlx=warn,sea_orm=warn";

pub fn init() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    init_with(io::stderr, filter);
}

/// Installs the global subscriber writing to `writer` (tests capture logs this way).
pub fn init_with<W>(writer: W, filter: EnvFilter)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let json = std::env::var("LEADPIPE_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let ansi = std::io::IsTerminal::is_terminal(&io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(Masking(writer));
    let result = if json {
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
