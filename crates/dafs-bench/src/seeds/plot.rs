//! PNG plots of the seeds report: one per figure that has our series over a size axis
//! (the papers' own curves are not in their text, so the plot shows ours; the tables
//! beside it carry the published values).

use std::path::Path;

use super::report::SeedsReport;
use crate::plot::{line_plot, load_font, Series};

/// Draw seeds-<figure id>.png for every figure with a curve; records the file name in
/// the figure. Figures whose series have fewer than two points get no plot.
pub fn plots(rep: &mut SeedsReport, out: &Path) -> Result<(), String> {
    let text = load_font();
    for f in rep.figures.iter_mut() {
        let Some(xdesc) = f.x_axis.clone().filter(|x| x.contains("bytes")) else { continue };
        let series: Series = f
            .ours
            .iter()
            .filter(|s| s.points.len() >= 2)
            .map(|s| (s.label.clone(), s.points.clone()))
            .collect();
        if series.is_empty() {
            continue;
        }
        let name = format!("seeds-{}.png", f.id);
        let title = format!("Seed {} {}: {} (ours)", f.seed, f.figure, f.metric);
        let ydesc = format!("{} ({})", f.metric, f.units);
        match line_plot(&out.join(&name), &title, &xdesc, &ydesc, &series, text) {
            Ok(()) => f.plot = Some(name),
            // A series of zeros (log axis) is no reason to lose the report.
            Err(e) => f.missing.push(format!("plot: {e}")),
        }
    }
    Ok(())
}
