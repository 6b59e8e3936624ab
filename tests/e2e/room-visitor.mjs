// A waiting room's visitor for the tests: one cookie jar of one cookie,
// the room's, kept as a browser keeps it, and an address of its own (a
// room limits how often one address joins).
let visitors = 0;

/** An address no other visitor of this process has: 10.x.y.z. */
export function visitorAddress() {
  visitors += 1;
  return `10.${(visitors >> 16) & 255}.${(visitors >> 8) & 255}.${visitors & 255}`;
}

/** A visitor with a cookie jar of one: the room's cookie. `fetch` is the
 * isolate it talks to: `(path, init) => Response`. */
export class Visitor {
  constructor(fetch, ip = visitorAddress()) {
    this.fetch = fetch;
    this.ip = ip;
    this.cookie = null;
  }

  async get(path, { accept = "application/json", cookie } = {}) {
    const headers = { accept, "cf-connecting-ip": this.ip };
    const sending = cookie ?? this.cookie;
    if (sending) headers.cookie = sending;
    const sent = performance.now();
    const response = await this.fetch(path, { headers });
    const received = performance.now();
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";").map((s) => s.trim());
      const gone = attributes.some((a) => a.toLowerCase() === "max-age=0");
      this.cookie = gone ? null : pair;
    }
    const text = await response.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: response.status, headers: response.headers, text, body, sent, received };
  }
}
