//! A text table that fits a width: when its columns do not fit, the least important go
//! first, and the row names and the columns marked essential stay.

use std::fmt::Write;

/// One column: its heading, how it aligns, and how long it stays when room is short
/// (0 stays always; higher numbers go first).
pub(super) struct Column {
    pub head: &'static str,
    pub left: bool,
    pub drop_order: u8,
}

impl Column {
    pub(super) fn left(head: &'static str) -> Column {
        Column {
            head,
            left: true,
            drop_order: 0,
        }
    }

    pub(super) fn right(head: &'static str, drop_order: u8) -> Column {
        Column {
            head,
            left: false,
            drop_order,
        }
    }
}

pub(super) struct Table {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<String>>,
}

/// Space before the table and between its columns.
const INDENT: usize = 2;
const GAP: usize = 2;

impl Table {
    pub(super) fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.columns.len());
        self.rows.push(row);
    }

    fn column_width(&self, i: usize) -> usize {
        self.rows
            .iter()
            .map(|r| r[i].chars().count())
            .chain(std::iter::once(self.columns[i].head.chars().count()))
            .max()
            .unwrap_or(0)
    }

    /// The columns kept at `width`: every column while they fit, else the ones with the
    /// highest drop order leave first (the last in the table first among equals).
    pub(super) fn kept(&self, width: usize) -> Vec<usize> {
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|i| self.column_width(i))
            .collect();
        let mut kept: Vec<usize> = (0..self.columns.len()).collect();
        let total = |k: &[usize]| -> usize {
            INDENT + k.iter().map(|&i| widths[i]).sum::<usize>() + GAP * k.len().saturating_sub(1)
        };
        while total(&kept) > width {
            let Some(pos) = kept
                .iter()
                .enumerate()
                .filter(|(_, &i)| self.columns[i].drop_order > 0)
                .max_by_key(|(p, &i)| (self.columns[i].drop_order, *p))
                .map(|(p, _)| p)
            else {
                break;
            };
            kept.remove(pos);
        }
        kept
    }

    /// The table at `width` (see [`Table::kept`]), a line per row under the headings.
    pub(super) fn render(&self, out: &mut String, width: usize) {
        let kept = self.kept(width);
        let widths: Vec<usize> = kept.iter().map(|&i| self.column_width(i)).collect();
        let heads: Vec<&str> = kept.iter().map(|&i| self.columns[i].head).collect();
        let rows = self
            .rows
            .iter()
            .map(|r| kept.iter().map(|&i| r[i].as_str()).collect::<Vec<_>>());
        for cells in std::iter::once(heads).chain(rows) {
            let mut line = " ".repeat(INDENT);
            for (k, (cell, w)) in cells.iter().zip(&widths).enumerate() {
                if k > 0 {
                    line.push_str(&" ".repeat(GAP));
                }
                let pad = w.saturating_sub(cell.chars().count());
                if self.columns[kept[k]].left {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(vec![
            Column::left("name"),
            Column::right("wall s", 3),
            Column::right("ms", 0),
            Column::right("cpu", 1),
            Column::right("p99", 3),
        ]);
        t.push(vec![
            "http close".into(),
            "0.036".into(),
            "0.072".into(),
            "48.1/30.2".into(),
            "0.108".into(),
        ]);
        t
    }

    #[test]
    fn columns_leave_by_drop_order_and_the_essential_stay() {
        let t = table();
        assert_eq!(t.kept(200), [0, 1, 2, 3, 4]);
        // 2 + 10 + 6 + 5 + 9 + 5 + 4 gaps of 2 = 45.
        assert_eq!(t.kept(45), [0, 1, 2, 3, 4]);
        assert_eq!(t.kept(44), [0, 1, 2, 3]);
        assert_eq!(t.kept(36), [0, 2, 3]);
        assert_eq!(t.kept(10), [0, 2]);
        let mut out = String::new();
        t.render(&mut out, 36);
        assert_eq!(
            out,
            "  name           ms        cpu\n  http close  0.072  48.1/30.2\n"
        );
    }
}
