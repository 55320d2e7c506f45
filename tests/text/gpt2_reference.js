// GPT-2's reference encoder (the npm package gpt-3-encoder) on the strings of a JSON file:
// prints a JSON list of id lists. Usage: NODE_PATH=... node gpt2_reference.js strings.json
const fs = require('fs');
const { encode } = require('gpt-3-encoder');
const strings = JSON.parse(fs.readFileSync(process.argv[2], 'utf-8'));
process.stdout.write(JSON.stringify(strings.map(s => encode(s))));
