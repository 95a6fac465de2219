// The device-to-device copy kernel of vkcopy (compiled to SPIR-V by build.rs).
//
// Copies `rows * planes` rows of the same length between two storage buffers:
// per row, `wide` 16-byte words (vec4<u32>) and then `narrow` 4-byte words.
// The runtime uses the wide part only when every row starts at a 16-byte
// boundary on both sides; otherwise the whole row is narrow. One invocation
// copies one word per loop step; the loop strides over the whole grid, so any
// number of workgroups covers any copy.
//
// Bindings 0 and 2 view the same source range, 1 and 3 the same destination
// range; a copy reads only its source and writes disjoint words, so the
// aliased views never see each other's writes.

struct Params {
    // Index of the first wide word of row 0, in vec4 units of the bound ranges.
    src_wide: u32,
    dst_wide: u32,
    // Wide words per row.
    wide: u32,
    // Index of the first narrow word of row 0, in u32 units.
    src_narrow: u32,
    dst_narrow: u32,
    // Narrow words per row.
    narrow: u32,
    // The outer grid: `rows` rows in each of `planes` planes.
    rows: u32,
    planes: u32,
    // Strides of rows and planes, in u32 units.
    src_row: u32,
    dst_row: u32,
    src_plane: u32,
    dst_plane: u32,
}

var<immediate> p: Params;

@group(0) @binding(0) var<storage, read> src16: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst16: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> src4: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst4: array<u32>;

const GROUP: u32 = 256u;

// Source and destination offsets of row `r` (rows first, then planes), in u32 units.
fn row_start(r: u32) -> vec2<u32> {
    let row = r % p.rows;
    let plane = r / p.rows;
    return vec2<u32>(row * p.src_row + plane * p.src_plane, row * p.dst_row + plane * p.dst_plane);
}

@compute @workgroup_size(256)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let step = groups.x * GROUP;
    let rows = p.rows * p.planes;
    if rows == 1u {
        // One contiguous run: no index arithmetic beyond the offsets.
        for (var i = gid.x; i < p.wide; i += step) {
            dst16[p.dst_wide + i] = src16[p.src_wide + i];
        }
        for (var i = gid.x; i < p.narrow; i += step) {
            dst4[p.dst_narrow + i] = src4[p.src_narrow + i];
        }
        return;
    }
    let wide_total = p.wide * rows;
    for (var i = gid.x; i < wide_total; i += step) {
        let r = i / p.wide;
        let o = row_start(r) / 4u;
        let c = i - r * p.wide;
        dst16[p.dst_wide + o.y + c] = src16[p.src_wide + o.x + c];
    }
    let narrow_total = p.narrow * rows;
    for (var i = gid.x; i < narrow_total; i += step) {
        let r = i / p.narrow;
        let o = row_start(r);
        let c = i - r * p.narrow;
        dst4[p.dst_narrow + o.y + c] = src4[p.src_narrow + o.x + c];
    }
}
