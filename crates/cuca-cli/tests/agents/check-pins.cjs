// Exits 0 when every package pinned in package.json is installed at exactly its pinned
// version under the node_modules given (argv[2]/node_modules), and the two agents' native
// binaries (shipped as optional platform packages) are there; else names what is not.
const fs = require("fs");
const path = require("path");
const root = process.argv[2];
const pins = require(path.join(__dirname, "package.json")).dependencies;
let missing = [];
for (const [name, version] of Object.entries(pins)) {
  let installed;
  try {
    installed = JSON.parse(fs.readFileSync(path.join(root, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    installed = "absent";
  }
  if (installed !== version) missing.push(`${name} ${version} (installed: ${installed})`);
}
for (const bin of ["claude", "codex"]) {
  if (!fs.existsSync(path.join(root, "node_modules", ".bin", bin))) missing.push(`.bin/${bin}`);
}
if (missing.length) {
  console.error(`agents not installed as pinned: ${missing.join(", ")}`);
  process.exit(1);
}
