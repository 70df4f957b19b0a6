package plan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestKindsListsEveryDeclaredKind reads action.go: a kind declared there and missing from Kinds()
// would escape every check that ranges over Kinds().
func TestKindsListsEveryDeclaredKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "action.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []Kind
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Kind" {
				for _, n := range vs.Names {
					declared = append(declared, Kind(n.Name))
				}
			}
		}
	}
	if len(declared) < 20 {
		t.Fatalf("found only %d kinds in action.go: the parse is wrong", len(declared))
	}
	if !slices.Equal(declared, Kinds()) {
		t.Errorf("Kinds() = %v\naction.go declares %v", Kinds(), declared)
	}
	for _, k := range Kinds() {
		if string(k) == "" {
			t.Errorf("a kind has no value")
		}
	}
}

func TestKindProperties(t *testing.T) {
	type props struct{ acts, member, orphan, starts, disrupts, recovery bool }
	want := map[Kind]props{
		Nothing:               {},
		Wait:                  {},
		AdoptSpec:             {acts: true},
		CreateMember:          {acts: true},
		BootstrapSeed:         {acts: true, member: true, starts: true},
		AddLearner:            {acts: true, member: true, starts: true},
		CreatePod:             {acts: true, member: true, starts: true},
		PromoteLearner:        {acts: true, member: true},
		RecordPhase:           {acts: true, member: true},
		RemoveMember:          {acts: true, member: true, orphan: true, disrupts: true},
		DeletePod:             {acts: true, member: true, disrupts: true},
		DeletePVC:             {acts: true, member: true, disrupts: true},
		ResetMember:           {acts: true, member: true},
		DeleteMember:          {acts: true, member: true},
		FinalizeMember:        {acts: true, member: true},
		MoveLeader:            {acts: true, member: true, orphan: true},
		RestartContainer:      {acts: true, member: true, disrupts: true},
		ResizePod:             {acts: true, member: true},
		RecordTemplate:        {acts: true, member: true},
		PatchPodMetadata:      {acts: true, member: true},
		Defragment:            {acts: true, member: true, disrupts: true},
		RecordDefragmentation: {acts: true, member: true},
		Compact:               {acts: true},
		DisarmAlarm:           {acts: true},
		StartRecovery:         {acts: true, recovery: true},
		RecoveryStep:          {acts: true, recovery: true},
		DetachMember:          {acts: true, member: true},
		DiscardMember:         {acts: true, member: true, recovery: true},
		FinishRecovery:        {acts: true, recovery: true},
		AbortRecovery:         {acts: true, recovery: true},
		ExpandPVC:             {acts: true, member: true},
		PrepareEviction:       {acts: true, member: true, disrupts: true},
		ScaleSource:           {acts: true},
		Downgrade:             {acts: true},
		StartHandOver:         {acts: true},
		Authenticate:          {acts: true},
	}
	for _, k := range Kinds() {
		w, ok := want[k]
		if !ok {
			t.Errorf("%s: no expectation in this table", k)
			continue
		}
		got := props{k.Acts(), k.NeedsMember(), k.OrphanAllowed(), k.StartsMember(), k.Disrupts(), k.Recovery()}
		if got != w {
			t.Errorf("%s: got %+v, want %+v", k, got, w)
		}
	}
}
