// The dashboard's sales: for each quota every caller shares (a global
// rule, or a global `also` layer under a per-user limit, named as its
// policies are: `checkout.all`), what `GET rules/{id}` answers summed over
// its parts (what is sold and left over the whole window, exact, from the
// parts' logs; the rate and the time to sell out; a chart per second of
// the last five minutes; refusals, sampled), and the override of its
// whole limit. Every value reaches the page as text.
import { Charts } from "./charts.js";

const SECOND = 1_000;
const SALE_SECONDS = 300;
const HEIGHT = 170;

/** The last five minutes, one point per second (zero when nothing
 * counted), from the view's seconds that saw a decision. */
function seconds(perSecond, now) {
  const last = Math.floor(now / SECOND);
  const bySecond = new Map(perSecond.map(([at, admitted, refused]) => [at, [admitted, refused]]));
  const xs = [];
  const admitted = [];
  const refused = [];
  for (let at = last - SALE_SECONDS + 1; at <= last; at += 1) {
    const row = bySecond.get(at);
    xs.push(at);
    admitted.push(row?.[0] ?? 0);
    refused.push(row?.[1] ?? 0);
  }
  return [xs, admitted, refused];
}

/** The sales panel. `tools` are main.js's helpers: `el`, `number`,
 * `duration`, `chartOptions`, `stateOf`, `explain`, `act`, `call` and
 * `segment`. */
export class Sales {
  constructor(tools) {
    this.tools = tools;
    this.cards = new Map();
    this.charts = new Charts(() => this.cards.values(), (width) => this.options(width), HEIGHT);
  }

  /** The global layers (`also`) under per-key rules, each shaped as a
   * global rule and named as its policies are (`checkout.all`): the admin
   * API answers their sale and override under that name. */
  static layers(rules) {
    return rules.rules.flatMap((rule) => (rule.also ?? [])
      .filter((layer) => layer.scope === "global")
      .map((layer) => ({ id: layer.lookup, scope: "global", split: layer.split, tiers: [{ policies: layer.policies }] })));
  }

  options(width) {
    const options = this.tools.chartOptions(width);
    options.series = options.series.slice(0, 3);
    return options;
  }

  /** One card per shared quota, in the config's order, into `box`;
   * `section` is hidden when there is none. */
  render(section, box, rules, viewed) {
    const globals = [...rules.rules.filter((rule) => rule.scope === "global"), ...Sales.layers(rules)];
    section.hidden = globals.length === 0;
    for (const [id, card] of this.cards) {
      if (!globals.some((rule) => rule.id === id)) {
        card.chart?.destroy();
        card.card.remove();
        this.cards.delete(id);
      }
    }
    globals.forEach((rule, i) => {
      let card = this.cards.get(rule.id);
      if (!card) {
        card = this.card(rule);
        this.cards.set(rule.id, card);
      }
      if (box.children[i] !== card.card) box.insertBefore(card.card, box.children[i] ?? null);
      this.fill(card, viewed.get(rule.id));
    });
  }

  card(rule) {
    const { el, duration } = this.tools;
    const id = rule.id;
    const header = el("header", {}, el("h3", {}, id));
    const status = el("span", {});
    header.append(status);
    const figures = el("dl", { class: "sale-figures" });
    const chartBox = el("div", { class: "chart", role: "img", "aria-label": `Admitted and refused per second for ${id}, last 5 minutes` });
    const note = el("p", { class: "message error" });
    const partsBody = el("tbody");
    const current = el("p", { class: "wrap" });
    const policies = rule.tiers[0]?.policies ?? [];
    const limit = el("input", { id: `override-limit-${id}`, name: "limit", type: "number", min: "1", step: "1", required: true });
    const windowSelect = el("select", { id: `override-window-${id}`, name: "window" },
      ...policies.map((p) => el("option", { value: `${p.window_ms}ms` }, `${p.name} (${duration(p.window_ms)})`)));
    const reason = el("input", { id: `override-reason-${id}`, name: "reason", type: "text", maxlength: "200", autocomplete: "off" });
    const lift = el("button", { type: "button", onclick: () => this.lift(id) }, "Lift override");
    const form = el("form", { class: "override-form", "aria-label": `Override of ${id}'s whole limit` },
      el("div", { class: "field" }, el("label", { for: limit.id }, "Whole limit"), limit),
      policies.length > 1 ? el("div", { class: "field" }, el("label", { for: windowSelect.id }, "Policy"), windowSelect) : null,
      el("div", { class: "field grow" }, el("label", { for: reason.id }, "Reason"), reason),
      el("button", { type: "submit" }, "Set override"),
      lift);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const body = { limit: Number(limit.value) };
      if (policies.length > 1) body.window = windowSelect.value;
      if (reason.value.trim()) body.reason = reason.value.trim();
      this.set(id, body, form);
    });
    const card = el("article", { class: "card sale-card", "data-sale": id },
      header,
      el("div", {}, figures, chartBox, note),
      el("div", {},
        el("h4", {}, "Override of the whole limit"), current,
        el("details", { class: "override" }, el("summary", {}, "Set or lift it"), form),
        el("details", { class: "parts" }, el("summary", {}, "Parts"),
          el("div", { class: "scroll" }, el("table", {},
            el("thead", {}, el("tr", {}, ...["Part", "State", "Used", "Admitted", "Refused"].map((h) => el("th", { scope: "col" }, h)))),
            partsBody)))));
    return { card, status, figures, chartBox, note, partsBody, current, lift, chart: null, data: null };
  }

  fill(card, view) {
    const { el, number, duration, stateOf, explain } = this.tools;
    if (!view || view.error) {
      card.note.textContent = view ? explain(view.error) : "Not read yet.";
      card.note.hidden = false;
      return;
    }
    const current = stateOf(view);
    // A quota nobody used in five minutes shows its figures, not a flat chart.
    card.card.classList.toggle("quiet", view.admitted + view.refused === 0 && !view.override && current.state === "open");
    card.status.replaceChildren(el("span", { class: `tag ${current.state}` }, current.state),
      ...(current.reason ? [el("span", { class: "muted reason" }, ` ${current.reason}`)] : []));
    const sellOut = view.sell_out_ms === null ? "not at this rate" : view.sell_out_ms === 0 ? "sold out" : `in ${duration(view.sell_out_ms)}`;
    const rate = view.rate.admitted / view.rate.over_s;
    // Sold and left are what the parts' logs hold, exact, over the whole
    // window; refusals are counted in the parts' memory (see the docs).
    const figures = [
      ...view.quota.map((q) => ["admitted", `Sold of ${q.policy}`, `${number.format(q.used)} of ${number.format(q.limit)} / ${duration(q.window_ms)}`]),
      ...view.quota.map((q) => ["", `Left of ${q.policy}`, `${number.format(q.remaining)} of ${number.format(q.limit)} / ${duration(q.window_ms)}`]),
      ["", `Rate, last ${view.rate.over_s} s`, `${rate.toFixed(1)} / s`],
      ["", "Sells out", sellOut],
      ["refused", "Refused by its parts, 5 min (sampled)", number.format(view.refused)],
    ];
    card.figures.replaceChildren(...figures.map(([kind, name, value]) => el("div", { class: kind }, el("dt", {}, name), el("dd", {}, value))));
    card.note.hidden = view.unreachable.length === 0;
    card.note.textContent = card.note.hidden ? "" : `Parts not answering: ${view.unreachable.join(", ")}. The figures are the other parts'.`;
    card.data = seconds(view.per_second, view.now_ms);
    this.charts.draw(card);
    card.current.replaceChildren(...(view.override
      ? [el("span", { class: "tag" }, "override"), " ",
        view.override.policies.map((p) => `${p.name}: ${number.format(p.limit)} / ${duration(p.window_ms)}`).join(", "),
        view.override.reason ? ` (${view.override.reason})` : "",
        view.override.parts < view.split ? ` · held by ${view.override.parts} of ${view.split} parts: set it again` : ""]
      : [el("span", { class: "muted" }, "No override: the config's limit applies.")]));
    card.lift.disabled = !view.override;
    card.partsBody.replaceChildren(...view.parts.map((part) => el("tr", {},
      el("td", { class: "key" }, part.key),
      el("td", {}, el("span", { class: `tag ${part.state.state}` }, part.state.state)),
      el("td", { class: "num" }, part.slots.map((slot) => `${number.format(slot.used)} of ${number.format(slot.limit)}`).join(", ") || "0"),
      el("td", { class: "num" }, number.format(part.admitted)),
      el("td", { class: "num" }, number.format(part.refused)))));
  }

  async set(rule, body, form) {
    const { act, call, segment, number } = this.tools;
    const answer = await act(() => call("PUT", `rules/${segment(rule)}/override`, body), `The whole limit of ${rule} is ${number.format(body.limit)}.`);
    if (answer) form.reset();
  }

  async lift(rule) {
    const { act, call, segment } = this.tools;
    if (!confirm(`Lift the override of ${rule}? The config's limit applies again; what was admitted keeps counting.`)) return;
    await act(() => call("DELETE", `rules/${segment(rule)}/override`), `Lifted the override of ${rule}.`);
  }
}
