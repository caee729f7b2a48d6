package journal

import "slices"

// segments lists the segment numbers in dir, ascending, and their seeds
// (one per number: see segmentFiles).
func segments(dir string) ([]uint64, seals, error) {
	files, err := segmentFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []uint64
	sl := seals{}
	for _, f := range files {
		out = append(out, f.n)
		sl[f.n] = f.seed
	}
	return slices.Compact(out), sl, nil
}
