//! `vkcopy-suite merge REPORT...`: one device x case table from many runs
//! (a fleet's GPUs, their shards, several policies).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::report::read::Loaded;

/// One column: a configuration ([`Loaded::label`]) and its counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Column {
    /// What tells the configuration apart ([`Loaded::label`]).
    pub label: String,
    /// The device's name.
    pub device: String,
    /// Its driver.
    pub driver: String,
    /// The Vulkan version it supports.
    pub api_version: String,
    /// The memory-type selection policy.
    pub policy: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The recorded table simulated, if any.
    pub simulated_memory: Option<String>,
    /// The reports joined into this column.
    pub files: Vec<String>,
    /// Cases per verdict.
    pub verdicts: BTreeMap<String, usize>,
}

/// One row: a case and its verdict per column (None: not run there).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The case's name.
    pub name: String,
    /// Its verdict in each column, in the columns' order.
    pub verdicts: Vec<Option<String>>,
}

/// The merged table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Merged {
    /// One per configuration, in the order the reports were given.
    pub columns: Vec<Column>,
    /// Every case of any report, by name.
    pub rows: Vec<Row>,
}

/// Merges loaded reports (one per configuration) into one table.
pub fn merge(reports: &[Loaded]) -> Merged {
    let mut names: Vec<&str> = reports
        .iter()
        .flat_map(|r| r.cases.iter().map(|c| c.name.as_str()))
        .collect();
    names.sort();
    names.dedup();
    let columns = reports
        .iter()
        .map(|r| {
            let mut verdicts = BTreeMap::new();
            for c in &r.cases {
                *verdicts.entry(c.verdict.clone()).or_insert(0) += 1;
            }
            Column {
                label: r.label(),
                device: r.device.clone(),
                driver: r.driver.clone(),
                api_version: r.api_version.clone(),
                policy: r.policy.clone(),
                simulated_memory: r.simulated_memory.clone(),
                files: r.files.iter().map(|f| f.display().to_string()).collect(),
                verdicts,
            }
        })
        .collect();
    let rows = names
        .into_iter()
        .map(|name| Row {
            name: name.to_owned(),
            verdicts: reports
                .iter()
                .map(|r| r.case(name).map(|c| c.verdict.clone()))
                .collect(),
        })
        .collect();
    Merged { columns, rows }
}

impl Merged {
    /// Whether any case fails a run in any column.
    pub fn has_failures(&self) -> bool {
        self.rows.iter().any(|r| {
            r.verdicts
                .iter()
                .flatten()
                .any(|v| matches!(v.as_str(), "fail" | "unexpected_pass"))
        })
    }

    /// The table as Markdown: a column per configuration, counts first;
    /// failing cells in bold, `-` where the case did not run.
    pub fn markdown(&self) -> String {
        let mut out = String::from("# vkcopy-suite on the fleet\n\n| | ");
        out += &self
            .columns
            .iter()
            .map(|c| c.label.as_str())
            .collect::<Vec<_>>()
            .join(" | ");
        out += " |\n|---|";
        out += &"---|".repeat(self.columns.len());
        out += "\n";
        let info = |f: &dyn Fn(&Column) -> String| {
            self.columns.iter().map(f).collect::<Vec<_>>().join(" | ")
        };
        out += &format!("| driver | {} |\n", info(&|c| c.driver.clone()));
        out += &format!("| Vulkan | {} |\n", info(&|c| c.api_version.clone()));
        out += &format!(
            "| counts | {} |\n",
            info(&|c| c
                .verdicts
                .iter()
                .map(|(v, n)| format!("{n} {v}"))
                .collect::<Vec<_>>()
                .join(", "))
        );
        for r in &self.rows {
            let cells: Vec<String> = r
                .verdicts
                .iter()
                .map(|v| match v.as_deref() {
                    None => "-".to_owned(),
                    Some(v @ ("fail" | "unexpected_pass")) => format!("**{v}**"),
                    Some(v) => v.to_owned(),
                })
                .collect();
            out += &format!("| {} | {} |\n", r.name, cells.join(" | "));
        }
        out
    }
}
