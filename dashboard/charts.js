// A set of uPlot charts that follow their box's width and the colour
// scheme (charts take their colours from CSS variables, so a change of
// scheme rebuilds them). Each view is `{ chartBox, chart, data }`.
import uPlot from "uplot";

export class Charts {
  /** `views()` lists the views drawn; `options(width)` builds a chart's
   * options; `height` is every chart's. */
  constructor(views, options, height) {
    this.views = views;
    this.options = options;
    this.resizer = new ResizeObserver((entries) => {
      for (const entry of entries) {
        for (const view of this.views()) {
          if (view.chartBox === entry.target && view.chart) view.chart.setSize({ width: entry.contentRect.width, height });
        }
      }
    });
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
      for (const view of this.views()) {
        if (!view.chart) continue;
        view.chart.destroy();
        view.chart = new uPlot(this.options(view.chartBox.clientWidth), view.data, view.chartBox);
      }
    });
  }

  /** Draws `view.data`: into its chart, or a new one once its box has a
   * width (a hidden box has none yet). */
  draw(view) {
    if (view.chart) view.chart.setData(view.data);
    else if (view.chartBox.clientWidth > 0) {
      view.chart = new uPlot(this.options(view.chartBox.clientWidth), view.data, view.chartBox);
      this.resizer.observe(view.chartBox);
    }
  }
}
