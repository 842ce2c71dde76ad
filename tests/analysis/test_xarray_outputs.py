#!/usr/bin/python3
"""Issue 27: every group of a results file opens with xarray (h5netcdf and netCDF4 engines) with
named dimensions from its dimension scales, coordinates where the contract has them, `units` and
`long_name` on every numeric array, and variable-length UTF-8 strings; the resolved deck stays a
root attribute. Tiny train (logistic, network, FeO2), influence, whatif, lia and fldp runs.

Usage: test_xarray_outputs.py FLUENCE_BINARY SOURCE_DIR
"""

import math
import tomllib
import unittest
import warnings

# Debian's netCDF4 was built against another numpy minor version: harmless, and not ours.
warnings.filterwarnings("ignore", "numpy.ndarray size changed")

import h5py
import numpy as np
import xarray as xr

import tiny_runs

ENGINES = ("h5netcdf", "netcdf4")
FLUENCE, SOURCE = tiny_runs.arguments()


def groups_with_arrays(path):
    """The groups of a results file that hold datasets, as '/a/b'."""
    found = []
    with h5py.File(path, "r") as f:
        def visit(name, item):
            if isinstance(item, h5py.Group) and any(
                    isinstance(child, h5py.Dataset) for child in item.values()):
                found.append("/" + name)
        f.visititems(visit)
    return found


def open_group(path, group, engine="h5netcdf"):
    return xr.open_dataset(path, group=group, engine=engine)


def dims(dataset, name):
    return dataset[name].dims


class XarrayOutputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        r = cls.runs
        cls.files = {
            "train": r.quickstart(),
            "network": r.run("train", r.input("influence_mlp.toml"), "network",
                             "federation.rounds=2", 'federation.polish="none"'),
            "private": r.private(),
            "influence": r.influence(),
            "whatif": r.whatif(),
            "lia": r.lia(),
            "fldp": r.fldp(),
        }

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def test_every_group_opens_with_named_dimensions_and_units(self):
        for run, path in self.files.items():
            for group in groups_with_arrays(path):
                for engine in ENGINES:
                    with self.subTest(run=run, group=group, engine=engine):
                        # Without dimension scales xarray refuses the group (h5netcdf: "no
                        # dimension scale associated with axis 0"; netCDF4: phony dims).
                        ds = open_group(path, group, engine)
                        self.assertFalse([d for d in ds.dims if str(d).startswith("phony")])
                        for name, variable in ds.variables.items():
                            if variable.dtype.kind not in "fiu":
                                continue
                            self.assertIn("units", variable.attrs, name)
                            self.assertTrue(variable.attrs.get("long_name"), name)

    def test_train_metrics_model_clients(self):
        path = self.files["train"]
        metrics = open_group(path, "/metrics")
        rounds = tiny_runs.QUICKSTART_ROUNDS
        self.assertEqual(dims(metrics, "test_accuracy"), ("round",))
        self.assertEqual(list(metrics["round"].values), list(range(1, rounds + 1)))
        self.assertEqual(metrics["test_loss"].attrs["units"], "nat")
        self.assertEqual(metrics["wall_time_s"].attrs["units"], "s")
        self.assertEqual(metrics["test_accuracy"].attrs["units"], "1")
        self.assertEqual(dims(metrics, "peak_memory_bytes"), ("rank",))
        self.assertEqual(metrics["peak_memory_bytes"].attrs["units"], "bytes")
        self.assertEqual(metrics["setup_time_s"].attrs["units"], "s")
        model = open_group(path, "/model")
        with h5py.File(path, "r") as f:
            classes = list(f["/model/theta"].attrs["classes"])
            features = list(f["/model/theta"].attrs["features"])
            attributes = list(f["/clients/epsilon"].attrs["attributes"])
            theta = f["/model/theta"][...]
        self.assertEqual(dims(model, "theta"), ("class", "feature"))
        self.assertEqual(list(model["class"].values), classes)
        self.assertEqual(list(model["feature"].values), features)
        np.testing.assert_array_equal(model["theta"].values, theta)
        clients = open_group(path, "/clients")
        self.assertEqual(dims(clients, "epsilon"), ("client", "attribute"))
        self.assertEqual(list(clients["attribute"].values), attributes)
        self.assertEqual(dims(clients, "size"), ("client",))
        self.assertEqual(clients.sizes["client"], 5)
        self.assertEqual(int(clients["size"].sum()), 4800)

    def test_network_parameters_are_one_dimension(self):
        model = open_group(self.files["network"], "/model")
        self.assertEqual(dims(model, "theta"), ("parameter",))
        self.assertNotIn("parameter", model.coords)  # a dimension without coordinate values

    def test_rounds_align_across_groups(self):
        path = self.files["private"]
        metrics, privacy, feo2 = (open_group(path, g) for g in ("/metrics", "/privacy", "/feo2"))
        merged = xr.merge([metrics["test_accuracy"], privacy["epsilon"], feo2["acc_g"]],
                          join="exact")
        self.assertEqual(merged.sizes["round"], 4)
        self.assertEqual(list(merged["round"].values), [1, 2, 3, 4])
        self.assertTrue(bool((np.diff(merged["epsilon"].values) > 0).all()))
        self.assertEqual(dims(privacy, "opt_out_clients"), ("opt_out_client",))
        self.assertEqual(privacy.sizes["opt_out_client"], 6)  # 20% of 30 clients

    def test_influence(self):
        path = self.files["influence"]
        influence = open_group(path, "/influence")
        clients = open_group(path, "/clients")
        self.assertEqual(dims(influence, "client_removal_estimate"), ("client",))
        self.assertEqual(dims(influence, "client_removal_actual"), ("client",))
        self.assertEqual(dims(influence, "vectors"), ("client", "parameter"))
        self.assertEqual(influence.sizes["parameter"], 3 * 19)
        self.assertEqual(influence["client_removal_estimate"].attrs["units"], "nat")
        # The same client dimension in both groups: they align, one row per client.
        joined = xr.merge([influence["client_removal_estimate"], clients["size"]], join="exact")
        self.assertEqual(joined.sizes["client"], 20)
        ihvp = open_group(path, "/ihvp")
        self.assertEqual(dims(ihvp, "iterations"), ("solve",))
        self.assertEqual(ihvp.sizes["solve"], 21)  # s_test, then one per client vector

    def test_whatif_grid(self):
        path = self.files["whatif"]
        whatif = open_group(path, "/whatif")
        deck = tomllib.loads(h5py.File(path, "r").attrs["deck"])["whatif"]
        self.assertEqual(list(whatif["eps"].values), deck["epsilons"])
        self.assertEqual(list(whatif["group_fraction"].values), deck["fractions"])
        self.assertEqual(whatif["eps"].attrs["units"], "1")
        for variant in ("rr", "rr_l", "rr_flc"):
            cells = open_group(path, f"/whatif/{variant}")
            self.assertEqual(dims(cells, "estimated"), ("group_fraction", "eps"))
            self.assertEqual(dims(cells, "actual"), ("group_fraction", "eps", "draw"))
            self.assertEqual(cells.sizes["draw"], 2)
            self.assertEqual(dims(cells, "mae"), ("group_fraction",))
            self.assertEqual(cells["estimated"].attrs["units"], "nat")
            second = open_group(path, f"/whatif/{variant}/second_order")
            self.assertEqual(dims(second, "estimated"), ("group_fraction", "eps"))
        # The child groups' arrays take the grid's coordinates from /whatif when merged.
        estimated = open_group(path, "/whatif/rr")["estimated"].assign_coords(
            eps=whatif["eps"], group_fraction=whatif["group_fraction"])
        self.assertEqual(float(estimated.sel(eps=deck["epsilons"][-1]).isel(group_fraction=0)),
                         float(h5py.File(path, "r")["/whatif/rr/estimated"][0, -1]))

    def test_lia(self):
        path = self.files["lia"]
        lia = open_group(path, "/lia")
        self.assertEqual(dims(lia, "vote_sum"), ("participant",))
        self.assertEqual(lia.sizes["participant"], 60)
        self.assertEqual(dims(lia, "batch_labels"), ("participant", "class"))
        self.assertEqual(lia.sizes["class"], 4)
        self.assertEqual(dims(lia, "sign_checked"), ("checked",))
        self.assertEqual(lia["votes_cast"].attrs["units"], "count")
        fedavg = open_group(path, "/lia/fl/none")
        self.assertEqual(dims(fedavg, "test_accuracy"), ("round",))
        self.assertEqual(list(fedavg["round"].values), list(range(0, 6)))  # M0, then 5 rounds
        minority = open_group(path, "/lia/minority")
        self.assertEqual(dims(minority, "vote_sum"), ("fractions", "run"))
        self.assertEqual(list(minority["fractions"].values), [0.1, 0.2])
        timing = open_group(path, "/lia/timing")
        self.assertEqual(timing["votes"].attrs["units"], "s")

    def test_fldp(self):
        fldp = open_group(self.files["fldp"], "/fldp")
        self.assertEqual(dims(fldp, "aad"), ("case", "draw"))
        self.assertEqual(dims(fldp, "case_clients"), ("case", "client"))
        self.assertEqual(dims(fldp, "theta_estimate"), ("case", "parameter"))
        self.assertEqual(dims(fldp, "newton_ed_expected"), ("case", "newton_step"))
        self.assertEqual(fldp.sizes["draw"], 2)
        self.assertEqual(fldp["ald"].attrs["units"], "nat")

    def test_strings_are_variable_length_utf8_and_the_deck_stays(self):
        with h5py.File(self.files["private"], "r") as f:
            for name in ("deck", "command", "fluence_version", "git_revision"):
                kind = h5py.check_string_dtype(f.attrs.get_id(name).dtype)
                self.assertEqual((kind.encoding, kind.length), ("utf-8", None), name)
            kind = h5py.check_string_dtype(f["/privacy/mode"].dtype)
            self.assertEqual((kind.encoding, kind.length), ("utf-8", None))
            self.assertEqual(f["/privacy/mode"].asstr()[()], "feo2")
            deck = tomllib.loads(f.attrs["deck"])
            self.assertEqual(deck["privacy"]["mode"], "feo2")
            self.assertTrue(math.isclose(deck["privacy"]["ratio"], 0.5))
        root = xr.open_dataset(self.files["private"], engine="h5netcdf")
        self.assertIn("[privacy]", root.attrs["deck"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
