// The dashboard's waiting rooms: for each room, what `GET rooms` answers
// (the operator's state, waiting, active sessions, admitted in the last
// minute, a newcomer's estimated wait, per shard and summed) and the last
// hour of it, a point a minute, as a chart. The state is changed from the
// rule's buttons in the rules table. Every value reaches the page as text.
import { Charts } from "./charts.js";

const MINUTE = 60_000;
const HEIGHT = 170;

/** The rooms panel. `tools` are main.js's helpers: `el`, `number`,
 * `clock`, `stamp`, `css` and `duration`. */
export class Rooms {
  constructor(tools) {
    this.tools = tools;
    this.views = new Map();
    this.charts = new Charts(() => this.views.values(), (width) => this.options(width), HEIGHT);
  }

  /** Shows `answer.rooms` in `section` (hidden when there are none). */
  render(section, box, answer) {
    section.hidden = answer.rooms.length === 0;
    const ids = answer.rooms.map((room) => room.rule);
    for (const [id, view] of this.views) {
      if (!ids.includes(id)) {
        view.chart?.destroy();
        view.card.remove();
        this.views.delete(id);
      }
    }
    answer.rooms.forEach((room, i) => {
      let view = this.views.get(room.rule);
      if (!view) {
        view = this.card(room.rule);
        this.views.set(room.rule, view);
      }
      if (box.children[i] !== view.card) box.insertBefore(view.card, box.children[i] ?? null);
      this.show(view, room);
    });
  }

  card(id) {
    const { el } = this.tools;
    const chartBox = el("div", { class: "chart", role: "img", "aria-label": `Waiting, active and admitted per minute in room ${id}` });
    const figures = el("dl", { class: "figures room-figures" });
    const state = el("p", { class: "muted" });
    const control = el("span", { class: "room-state" });
    const shardBody = el("tbody");
    const card = el("article", { class: "card room-card", "data-room": id },
      el("header", {}, el("h3", {}, id), control, state),
      figures,
      el("div", { class: "plot" }, chartBox),
      el("details", { class: "minutes" },
        el("summary", {}, "Per shard"),
        el("div", { class: "scroll" }, el("table", { class: "shard-table" },
          el("thead", {}, el("tr", {},
            ...["Shard", "State", "Waiting", "Active", "Offered", "Admitted, last minute", "Wait for a newcomer", "Calls"].map((h, i) =>
              el("th", { scope: "col", class: i > 0 ? "num" : null }, h)))),
          shardBody))));
    return { card, chartBox, figures, state, control, shardBody, chart: null, data: null };
  }

  show(view, room) {
    const { el, number, duration, stamp } = this.tools;
    const wait = (s) => (s === 0 ? "none" : duration(s * 1000));
    // Paused: nobody is let in, newcomers queue; closed: 410 to all but
    // sessions. The reason is the operator's text: shown as text.
    view.control.replaceChildren(el("span", { class: `tag ${room.state}` }, room.state),
      ...(room.reason ? [" ", el("span", { class: "muted reason" }, room.reason)] : []));
    view.state.textContent = [
      // Opened (its pre-queue drawn); the tag beside says whether an
      // operator holds it.
      room.open ? null : `opens ${stamp.format(new Date(room.opens_at))}`,
      `sessions last ${duration(room.session_ms)}`,
      `pages refresh every ${duration(room.refresh_ms)}`,
      room.unanswered ? `${room.unanswered} shard(s) did not answer` : null,
    ].filter(Boolean).join(" · ");
    const figure = (name, value) => el("div", {}, el("dt", {}, name), el("dd", {}, value));
    view.figures.replaceChildren(
      figure("Waiting", number.format(room.waiting)),
      figure("Active", `${number.format(room.active + room.offered)} of ${number.format(room.active_limit)}`),
      figure("Admitted, last minute", `${number.format(room.admitted_last_minute)} of ${number.format(room.per_minute_limit)}`),
      figure("Wait for a newcomer", wait(room.wait_s)),
    );
    view.shardBody.replaceChildren(...room.shards.map((shard) =>
      shard.error
        ? el("tr", {}, el("th", { scope: "row" }, String(shard.shard)), el("td", { colspan: 7, class: "muted" }, shard.error))
        : el("tr", {},
          el("th", { scope: "row" }, String(shard.shard)),
          el("td", {}, el("span", { class: `tag ${shard.state}` }, shard.state)),
          el("td", { class: "num" }, number.format(shard.waiting)),
          el("td", { class: "num" }, `${number.format(shard.active + shard.offered)} of ${number.format(shard.places)}`),
          el("td", { class: "num" }, number.format(shard.offered)),
          el("td", { class: "num" }, `${number.format(shard.admitted_last_minute)} of ${number.format(shard.per_minute)}`),
          el("td", { class: "num" }, wait(shard.wait_s)),
          el("td", { class: "num" }, number.format(shard.calls)))));
    view.data = this.series(room, Date.now());
    this.charts.draw(view);
  }

  /** The last 60 minutes, a point a minute (the shards' first figures of
   * the minute), and this minute's point the figures of now; a minute no
   * shard sampled is a gap, not a zero. */
  series(room, now) {
    const last = Math.floor(now / MINUTE) * MINUTE;
    const byMinute = new Map(room.history.map((row) => [row.minute_ms, row]));
    byMinute.set(last, { waiting: room.waiting, active: room.active + room.offered, admitted: room.admitted_last_minute });
    const columns = [[], [], [], []];
    for (let m = last - 59 * MINUTE; m <= last; m += MINUTE) {
      const row = byMinute.get(m);
      columns[0].push(m / 1000);
      columns[1].push(row?.waiting ?? null);
      columns[2].push(row?.active ?? null);
      columns[3].push(row?.admitted ?? null);
    }
    return columns;
  }

  options(width) {
    const { css, number, clock } = this.tools;
    const text = css("--muted");
    const grid = css("--grid");
    const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const line = (label, color, dash) => ({
      label, stroke: color, width: 2, dash, spanGaps: true,
      // A room that just started has a point or two: draw them as dots.
      points: { show: (u, i) => u.data[i].filter((v) => v !== null).length < 3, size: 7 },
      value: (_, v) => (v === null ? "–" : number.format(v)),
    });
    return {
      width,
      height: HEIGHT,
      scales: { x: { time: true }, y: { range: (_, __, max) => [0, Math.max(4, Math.ceil(max * 1.15))] } },
      axes: [{ ...axis, space: 72 }, { ...axis, size: 52 }],
      series: [
        { value: (_, v) => (v === null ? "–" : clock.format(new Date(v * 1000))) },
        line("waiting", css("--refused")),
        line("active", css("--admitted")),
        line("admitted", css("--failed"), [5, 4]),
      ],
      cursor: { drag: { x: false, y: false } },
      legend: { live: false },
    };
  }
}
