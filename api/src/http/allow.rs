//! Which methods a path is served with, for answering a wrong method on a
//! known path `405` with `Allow` instead of `404`. Built once at start-up from
//! the operations the routes register (the same registration that serves
//! them and feeds the OpenAPI document), so it cannot list a method actix
//! does not serve.

use utoipa::openapi::path::{HttpMethod, Paths};

/// Path templates (`/api/leads/{id}`) and the methods each is served with.
#[derive(Debug, Default)]
pub struct AllowedMethods {
    routes: Vec<(Vec<Segment>, Vec<&'static str>)>,
}

#[derive(Debug, PartialEq)]
enum Segment {
    Literal(String),
    /// `{name}`: any one non-empty segment, as actix matches it.
    Param,
}

const METHODS: [(HttpMethod, &str); 8] = [
    (HttpMethod::Get, "GET"),
    (HttpMethod::Head, "HEAD"),
    (HttpMethod::Post, "POST"),
    (HttpMethod::Put, "PUT"),
    (HttpMethod::Patch, "PATCH"),
    (HttpMethod::Delete, "DELETE"),
    (HttpMethod::Options, "OPTIONS"),
    (HttpMethod::Trace, "TRACE"),
];

impl AllowedMethods {
    pub fn from_paths(paths: &Paths) -> Self {
        let routes = paths
            .paths
            .iter()
            .map(|(template, item)| {
                let methods = METHODS
                    .iter()
                    .filter(|(method, _)| {
                        match method {
                            HttpMethod::Get => &item.get,
                            HttpMethod::Head => &item.head,
                            HttpMethod::Post => &item.post,
                            HttpMethod::Put => &item.put,
                            HttpMethod::Patch => &item.patch,
                            HttpMethod::Delete => &item.delete,
                            HttpMethod::Options => &item.options,
                            HttpMethod::Trace => &item.trace,
                        }
                        .is_some()
                    })
                    .map(|(_, name)| *name)
                    .collect();
                (segments(template), methods)
            })
            .collect();
        Self { routes }
    }

    /// The `Allow` value for `path` (every method of every template it
    /// matches, in a fixed order), or `None` when no route has this path.
    pub fn allow(&self, path: &str) -> Option<String> {
        let asked: Vec<&str> = path.split('/').collect();
        let matched: Vec<&str> = self
            .routes
            .iter()
            .filter(|(template, _)| {
                template.len() == asked.len()
                    && template.iter().zip(&asked).all(|(t, a)| match t {
                        Segment::Literal(literal) => literal == a,
                        Segment::Param => !a.is_empty(),
                    })
            })
            .flat_map(|(_, methods)| methods.iter().copied())
            .collect();
        (!matched.is_empty()).then(|| {
            METHODS
                .iter()
                .map(|(_, name)| *name)
                .filter(|name| matched.contains(name))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }
}

fn segments(template: &str) -> Vec<Segment> {
    template
        .split('/')
        .map(|s| {
            if s.starts_with('{') && s.ends_with('}') {
                Segment::Param
            } else {
                Segment::Literal(s.to_owned())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::openapi::path::{OperationBuilder, PathItem, PathsBuilder};

    fn table() -> AllowedMethods {
        let op = || OperationBuilder::new().build();
        let paths = PathsBuilder::new()
            .path("/api/leads", PathItem::new(HttpMethod::Get, op()))
            .path("/api/leads", PathItem::new(HttpMethod::Post, op()))
            .path("/api/ops/inbox/{id}", PathItem::new(HttpMethod::Get, op()))
            .path(
                "/api/ops/inbox/retry",
                PathItem::new(HttpMethod::Post, op()),
            )
            .build();
        AllowedMethods::from_paths(&paths)
    }

    #[test]
    fn a_known_path_lists_its_methods_and_an_unknown_one_none() {
        let table = table();
        assert_eq!(table.allow("/api/leads").as_deref(), Some("GET, POST"));
        assert_eq!(table.allow("/api/ops/inbox/7").as_deref(), Some("GET"));
        // A literal and a parameter both match: actix would try both.
        assert_eq!(
            table.allow("/api/ops/inbox/retry").as_deref(),
            Some("GET, POST")
        );
        assert_eq!(table.allow("/api/leads/"), None);
        assert_eq!(table.allow("/api/ops/inbox/"), None);
        assert_eq!(table.allow("/api/ops/inbox/7/x"), None);
        assert_eq!(table.allow("/nope"), None);
    }
}
