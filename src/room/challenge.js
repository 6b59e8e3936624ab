(() => {
  const data = document.getElementById("work").dataset, work = +data.work;
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);
  const W = new Uint32Array(64);
  // SHA-256's compression of the 64 bytes of `q` from `o` into state `H`.
  const compress = (H, q, o) => {
    for (let i = 0; i < 16; i++, o += 4) W[i] = (q[o] << 24) | (q[o + 1] << 16) | (q[o + 2] << 8) | q[o + 3];
    for (let i = 16; i < 64; i++) {
      const x = W[i - 15], y = W[i - 2];
      W[i] = (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) +
        (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)) + W[i - 7] + W[i - 16];
    }
    let [a, b, c, d, e, f, g, h] = H;
    for (let i = 0; i < 64; i++) {
      const t = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
        ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      const u = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
        ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t) | 0; d = c; c = b; b = a; a = (t + u) | 0;
    }
    H[0] += a; H[1] += b; H[2] += c; H[3] += d; H[4] += e; H[5] += f; H[6] += g; H[7] += h;
  };
  // The puzzle's whole blocks are hashed once; each answer only its tail.
  const prefix = new TextEncoder().encode(data.puzzle + ".");
  const whole = prefix.length - (prefix.length % 64);
  const start = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  for (let o = 0; o < whole; o += 64) compress(start, prefix, o);
  const tail = prefix.subarray(whole), block = new Uint8Array(128), H = new Uint32Array(8);
  block.set(tail);
  let n = 0;
  const search = () => {
    for (const stop = n + 50000; n < stop; n++) {
      const digits = String(n);
      let k = tail.length;
      for (let i = 0; i < digits.length; i++) block[k++] = digits.charCodeAt(i);
      block[k++] = 0x80;
      const end = k + 8 > 64 ? 128 : 64, bits = (prefix.length + digits.length) * 8;
      block.fill(0, k, end);
      block[end - 4] = bits >>> 24; block[end - 3] = bits >>> 16; block[end - 2] = bits >>> 8; block[end - 1] = bits;
      H.set(start);
      compress(H, block, 0);
      if (end > 64) compress(H, block, 64);
      if (Math.clz32(H[0]) >= work) {
        const secure = location.protocol === "https:" ? "; secure" : "";
        document.cookie = `${data.cookie}=${data.puzzle}.${n}; path=/; max-age=300; samesite=strict${secure}`;
        location.replace(location.href);
        return;
      }
    }
    setTimeout(search);
  };
  search();
})();
